-- Parallel reviewers (SPEC §10): a darang run names its reviewer; NULL when darang
-- reviews alone, and for every other sister.
ALTER TABLE runs ADD COLUMN reviewer TEXT;
