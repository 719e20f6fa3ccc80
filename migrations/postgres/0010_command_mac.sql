-- Proof of a command's writer (SPEC §15): an HMAC over what it asks, keyed with the secret
-- in command_key (one row, made on first need). A row without one that verifies is refused.
ALTER TABLE commands ADD COLUMN mac TEXT;
CREATE TABLE command_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    key BYTEA NOT NULL
);
