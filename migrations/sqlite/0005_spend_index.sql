-- `sprint status` sums every sprint's usage; this index answers that without reading the
-- runs' large rows (tails, messages).
CREATE INDEX runs_spend ON runs (sprint_id, input_tokens, output_tokens, cost_usd);
