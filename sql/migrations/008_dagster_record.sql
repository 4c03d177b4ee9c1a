-- 008: what Dagster needs to be the system of record, kept in our database so
-- that recording never depends on Dagster being up.
--
-- * delivery_events: the outbox. Every delivery, knock, abandonment and
--   un-delivery of a document is a row, written by the database itself in the
--   transaction that makes the transition, whoever makes it (the webhook
--   service, a CLI sweep, a Dagster run, the briefs schedule, someone with
--   psql). Reporters turn the rows into events on the delivered_documents
--   asset and mark them reported (watch/delivery_events.py says who may report
--   which row, and how a row is reported once).
-- * dagster_heartbeats: the last time Dagster's daemon showed it is alive (a
--   heartbeat-sensor tick, a check evaluation), read by the webhook service's
--   dead-man's switch without any Dagster import.

CREATE TABLE delivery_events (
    id          bigserial PRIMARY KEY,
    occurred_at timestamptz NOT NULL DEFAULT now(),
    document_id bigint NOT NULL,
    person_id   bigint NOT NULL,
    kind        text NOT NULL,
    event       text NOT NULL CHECK (event IN ('delivered', 'knocked', 'abandoned', 'undelivered')),
    -- the abandon reason, or the error that un-delivered the document
    reason      text,
    -- chunks of a delivered document
    chunks      integer,
    -- who made the transition: the session's application_name (the service,
    -- the CLI, 'dagster-run:<run id>', …)
    source      text NOT NULL,
    -- a reporter holding the row ('push:<uuid>', 'run:<run id>', 'sensor'),
    -- and since when
    claimed_by  text,
    claimed_at  timestamptz,
    reported_at timestamptz
);

-- What is still to report: the outbox's own queue, small whatever the history.
CREATE INDEX delivery_events_unreported ON delivery_events (source, id)
    WHERE reported_at IS NULL;

CREATE FUNCTION record_delivery_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    writer text := coalesce(nullif(current_setting('application_name', true), ''), 'unknown');
BEGIN
    IF OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL THEN
        INSERT INTO delivery_events (document_id, person_id, kind, event, chunks, source)
        SELECT NEW.id, NEW.person_id, NEW.kind, 'delivered', count(*), writer
        FROM delivery_chunks WHERE document_id = NEW.id;
    END IF;
    IF OLD.delivered_at IS NOT NULL AND NEW.delivered_at IS NULL THEN
        INSERT INTO delivery_events (document_id, person_id, kind, event, reason, source)
        VALUES (NEW.id, NEW.person_id, NEW.kind, 'undelivered', left(NEW.last_delivery_error, 200),
                writer);
    END IF;
    IF OLD.knock_sent_at IS NULL AND NEW.knock_sent_at IS NOT NULL THEN
        INSERT INTO delivery_events (document_id, person_id, kind, event, source)
        VALUES (NEW.id, NEW.person_id, NEW.kind, 'knocked', writer);
    END IF;
    IF OLD.abandoned_at IS NULL AND NEW.abandoned_at IS NOT NULL THEN
        INSERT INTO delivery_events (document_id, person_id, kind, event, reason, source)
        VALUES (NEW.id, NEW.person_id, NEW.kind, 'abandoned', NEW.abandon_reason, writer);
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_delivery_events
    AFTER UPDATE OF delivered_at, knock_sent_at, abandoned_at ON documents
    FOR EACH ROW WHEN (OLD.delivered_at IS DISTINCT FROM NEW.delivered_at
                       OR OLD.knock_sent_at IS DISTINCT FROM NEW.knock_sent_at
                       OR OLD.abandoned_at IS DISTINCT FROM NEW.abandoned_at)
    EXECUTE FUNCTION record_delivery_event();

CREATE TABLE dagster_heartbeats (
    source  text PRIMARY KEY,
    seen_at timestamptz NOT NULL
);
