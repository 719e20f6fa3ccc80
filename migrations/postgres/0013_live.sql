-- What a running sister is doing now, from its CLI's event stream: the latest step, when
-- it started, and the tokens and cost so far (written about once a second, latest wins).
ALTER TABLE runs ADD COLUMN live_step TEXT;
ALTER TABLE runs ADD COLUMN live_step_at BIGINT;
ALTER TABLE runs ADD COLUMN live_input_tokens BIGINT;
ALTER TABLE runs ADD COLUMN live_output_tokens BIGINT;
ALTER TABLE runs ADD COLUMN live_cost_usd DOUBLE PRECISION;
