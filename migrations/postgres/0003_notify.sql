-- Wake-ups for the hosts (SPEC §9): whoever writes (a CLI on any host, the Discord bot, a
-- host's loop), the hosts listening on `hanarang` hear at once of a command given, a
-- sprint queued, a pipeline lock freed, a host that gave its name up, and a transition
-- logged (the Discord bot delivers it, whichever host committed it).
CREATE FUNCTION hanarang_notify() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('hanarang', TG_TABLE_NAME);
    RETURN NULL;
END;
$$;

CREATE TRIGGER commands_notify AFTER INSERT ON commands
    FOR EACH ROW EXECUTE FUNCTION hanarang_notify();
CREATE TRIGGER sprints_queued_notify AFTER INSERT ON sprints
    FOR EACH ROW EXECUTE FUNCTION hanarang_notify();
CREATE TRIGGER sprints_ended_notify AFTER UPDATE OF state ON sprints
    FOR EACH ROW WHEN (NEW.state IN ('deployed', 'aborted') AND OLD.state IS DISTINCT FROM NEW.state)
    EXECUTE FUNCTION hanarang_notify();
CREATE TRIGGER hosts_gone_notify AFTER DELETE ON hosts
    FOR EACH ROW EXECUTE FUNCTION hanarang_notify();
CREATE TRIGGER transitions_notify AFTER INSERT ON transitions
    FOR EACH ROW EXECUTE FUNCTION hanarang_notify();
