-- A sprint's end wakes the hosts through its transition: every change of a sprint's state
-- is logged in the same transaction, and `transitions_notify` (0003) fires on it. The
-- trigger that named the ended states in SQL goes, so no statement lists states: which
-- ones have ended is the pipeline's word.
DROP TRIGGER sprints_ended_notify ON sprints;
