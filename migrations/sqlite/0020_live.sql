-- What a running sister is doing now, from its CLI's event stream: the latest step, when
-- it started, and the tokens and cost so far (written about once a second, latest wins).
ALTER TABLE runs ADD COLUMN live_step TEXT;
ALTER TABLE runs ADD COLUMN live_step_at INTEGER;
ALTER TABLE runs ADD COLUMN live_input_tokens INTEGER;
ALTER TABLE runs ADD COLUMN live_output_tokens INTEGER;
ALTER TABLE runs ADD COLUMN live_cost_usd REAL;
