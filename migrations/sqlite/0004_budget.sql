-- A sprint's spending limit after a human resumed it past `pipeline.max_cost_usd`
-- (NULL: the configured limit).
ALTER TABLE sprints ADD COLUMN budget_usd REAL;
