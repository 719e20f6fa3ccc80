-- Each sprint's spend, rolled up as its runs end, so listing 10,000 sprints reads no runs.
ALTER TABLE sprints ADD COLUMN input_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sprints ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sprints ADD COLUMN cost_usd REAL NOT NULL DEFAULT 0.0;
UPDATE sprints SET
    input_tokens = (SELECT COALESCE(SUM(input_tokens), 0) FROM runs WHERE runs.sprint_id = sprints.id),
    output_tokens = (SELECT COALESCE(SUM(output_tokens), 0) FROM runs WHERE runs.sprint_id = sprints.id),
    cost_usd = (SELECT COALESCE(SUM(cost_usd), 0.0) FROM runs WHERE runs.sprint_id = sprints.id);

-- Sums now come from the sprint row; the index from 0005 would only slow run writes.
DROP INDEX IF EXISTS runs_spend;
