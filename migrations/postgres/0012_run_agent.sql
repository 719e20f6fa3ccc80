-- Which agent (a preset or profile name) ran each run, and until when a run that stopped
-- at its agent's usage limit left that agent paused: the fallback chain skips it (SPEC §17).
ALTER TABLE runs ADD COLUMN agent TEXT;
ALTER TABLE runs ADD COLUMN paused_until BIGINT;
-- Which agents are at their limit now, whatever sprint found it out: only paused runs.
CREATE INDEX runs_paused_until ON runs (paused_until) WHERE paused_until IS NOT NULL;
