-- Which agent (a preset or profile name) ran each run, and until when a run that stopped
-- at its agent's usage limit left that agent paused: the fallback chain skips it (SPEC §17).
ALTER TABLE runs ADD COLUMN agent TEXT;
ALTER TABLE runs ADD COLUMN paused_until BIGINT;
