-- The sprint's transition a command was given against (SPEC §15): the orchestrator
-- applies it only while the sprint is still there.
ALTER TABLE commands ADD COLUMN seq INTEGER;
