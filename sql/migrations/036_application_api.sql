-- 036: the application's door (issue 42). A company's application hands a
-- document over through the webhook service's HTTP API (/v1, service/api/),
-- once, whatever it retries; asks where it is; and hears what became of it
-- at an endpoint of its own, from a durable outbox.
--
-- * api_documents: who handed each document over, under which idempotency
--   key (the first answer is kept and replayed) and which replace key.
-- * api_people: the people an application knows, by its own user key.
-- * A replace key decides supersede for the applications' documents:
--   superseded() (025) replaces an API document only by a newer one of the
--   same application, person and replace key; one handed over without a key
--   is never superseded and supersedes nothing. Documents added any other
--   way (the CLI, the briefs schedule) keep 025's rule among themselves.
-- * A priority moves an API document in its person's turn (delivery_rank,
--   025): high goes with what the person asked for, low after the briefs.
-- * api_events: the applications' outbox. Triggers write a row in the
--   transaction that makes the transition, whoever makes it, as 008's do for
--   Dagster, for the applications whose endpoint a service has registered
--   (api_endpoints). The deliverer (service/api/events.py) claims the oldest
--   unsent event of each stream (a document, or a person), so a stream goes
--   out in order, at least once, from any number of processes.
-- * api_endpoints: each application's endpoint as the fleet knows it:
--   failing since when, how many failures in a row, when it may be tried
--   again (one process probes a failing endpoint at a time).
-- * api_rate_limits: each token's rate, one row per token (GCRA: the
--   theoretical arrival time), shared by every replica.

CREATE TABLE api_documents (
    document_id     bigint PRIMARY KEY REFERENCES documents (id),
    application     text NOT NULL,
    idempotency_key text,
    -- SHA-256 of the request as handed over (its JSON, canonical): the same
    -- key with another request is a conflict
    request_hash    bytea,
    -- the first answer, replayed to a retry with the same key
    answer          jsonb,
    replace_key     text,
    priority        text NOT NULL DEFAULT 'normal' CHECK (priority IN ('high', 'normal', 'low')),
    metadata        jsonb NOT NULL DEFAULT '{}'::jsonb,
    created_at      timestamptz NOT NULL DEFAULT now(),
    -- the message id of the last part whose reading was told (document.read
    -- once per delivery: a resend sends the parts under new ids)
    read_told_for   text
);
CREATE UNIQUE INDEX api_documents_idempotency ON api_documents (application, idempotency_key)
    WHERE idempotency_key IS NOT NULL;
CREATE INDEX api_documents_created ON api_documents (created_at);

CREATE TABLE api_people (
    application text NOT NULL,
    person_id   bigint NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    -- the application's own key for the person; NULL: known only by a
    -- document handed over for them
    user_key    text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (application, person_id)
);
CREATE UNIQUE INDEX api_people_key ON api_people (application, user_key)
    WHERE user_key IS NOT NULL;
CREATE INDEX api_people_person ON api_people (person_id);

-- The turn (025), with an application's priority: begun first, then what the
-- person asked for (a plan, or a document handed over as high), then the
-- rest (a brief), then what was handed over as low.
CREATE OR REPLACE FUNCTION delivery_rank(doc bigint, kind text) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE
        WHEN delivery_begun(doc) THEN 0
        ELSE coalesce((SELECT CASE a.priority WHEN 'high' THEN 1 WHEN 'low' THEN 3 END
                       FROM api_documents a WHERE a.document_id = doc),
                      CASE WHEN kind = 'plan' THEN 1 ELSE 2 END)
    END
$$;

-- Superseded (025), with the applications' replace keys: a document handed
-- over through the API is replaced only by a newer one of the same
-- application and person under the same replace key (whatever its kind or
-- day), and replaces nothing else; documents added any other way keep the
-- rule of kind and day among themselves.
CREATE OR REPLACE FUNCTION superseded(d documents) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (
        SELECT 1 FROM documents n
        LEFT JOIN api_documents na ON na.document_id = n.id
        LEFT JOIN api_documents da ON da.document_id = d.id
        WHERE n.person_id = d.person_id AND n.id > d.id
          AND n.status = 'succeeded' AND n.abandoned_at IS NULL AND n.awaiting_review_since IS NULL
          AND CASE WHEN na.document_id IS NULL AND da.document_id IS NULL
                   THEN n.kind = d.kind AND n.for_date IS NOT DISTINCT FROM d.for_date
                   ELSE na.application = da.application AND na.replace_key = da.replace_key
              END)
       AND NOT delivery_begun(d.id) AND NOT resent(d.id)
$$;

CREATE TABLE api_endpoints (
    application     text PRIMARY KEY,
    -- a service started with the application's endpoint; events are recorded
    -- from then on, until a service starts without it (removed_at)
    registered_at   timestamptz NOT NULL DEFAULT now(),
    removed_at      timestamptz,
    failing_since   timestamptz,
    failures        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    last_error      text,
    last_success_at timestamptz
);

CREATE TABLE api_events (
    id              bigserial PRIMARY KEY,
    -- what the application deduplicates on (the webhook-id header)
    event_id        uuid NOT NULL DEFAULT gen_random_uuid() UNIQUE,
    application     text NOT NULL,
    type            text NOT NULL CHECK (type IN ('document.delivered', 'document.read',
                                                  'document.abandoned', 'document.awaiting_reply',
                                                  'person.opted_out')),
    -- events of one stream are sent in order: 'document:<id>', 'person:<id>'
    stream          text NOT NULL,
    document_id     bigint,
    person_id       bigint NOT NULL,
    data            jsonb NOT NULL,
    created_at      timestamptz NOT NULL DEFAULT now(),
    attempts        integer NOT NULL DEFAULT 0,
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    claimed_by      uuid,
    claimed_at      timestamptz,
    last_error      text,
    delivered_at    timestamptz,
    -- not delivered within the retry horizon: given up, alerted
    expired_at      timestamptz,
    CHECK (delivered_at IS NULL OR expired_at IS NULL)
);
-- What is still to send: the outbox's own queue, small whatever the history.
CREATE INDEX api_events_waiting ON api_events (application, id)
    WHERE delivered_at IS NULL AND expired_at IS NULL;
CREATE INDEX api_events_stream ON api_events (stream, id)
    WHERE delivered_at IS NULL AND expired_at IS NULL;
CREATE INDEX api_events_done ON api_events (coalesce(delivered_at, expired_at))
    WHERE delivered_at IS NOT NULL OR expired_at IS NOT NULL;
CREATE INDEX api_events_document ON api_events (document_id, id) WHERE document_id IS NOT NULL;

CREATE FUNCTION notify_api_events() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    PERFORM pg_notify('api_events', '');
    RETURN NULL;
END
$$;

CREATE TRIGGER api_events_notify AFTER INSERT ON api_events
    FOR EACH STATEMENT EXECUTE FUNCTION notify_api_events();

-- A document event as the application reads it: the document, its person as
-- the application knows them, and what it handed over with it.
CREATE FUNCTION api_document_event(a api_documents, d documents, what jsonb) RETURNS jsonb
    LANGUAGE sql STABLE
    AS $$
    SELECT jsonb_build_object(
        'document', jsonb_build_object(
            'id', d.id, 'kind', d.kind, 'day', d.for_date,
            'idempotency_key', a.idempotency_key, 'replace_key', a.replace_key,
            'metadata', a.metadata),
        'person', jsonb_build_object(
            'id', d.person_id,
            'key', (SELECT p.user_key FROM api_people p
                    WHERE p.application = a.application AND p.person_id = d.person_id))
    ) || what
$$;

-- document.read once per delivery, when it is delivered and its last part
-- has been read (reading the chat shows every part before it). Asked by both
-- transitions, under the api_documents row's lock, so whichever commits
-- second sees the other.
CREATE FUNCTION tell_api_read(a api_documents, d documents) RETURNS void
    LANGUAGE plpgsql
    AS $$
DECLARE
    last_part delivery_chunks%ROWTYPE;
BEGIN
    SELECT * INTO last_part FROM delivery_chunks c
    WHERE c.document_id = d.id ORDER BY c.chunk_index DESC LIMIT 1;
    IF d.delivered_at IS NULL OR last_part.read_at IS NULL
       OR last_part.wa_message_id IS NOT DISTINCT FROM a.read_told_for THEN
        RETURN;
    END IF;
    UPDATE api_documents SET read_told_for = last_part.wa_message_id
    WHERE document_id = d.id;
    INSERT INTO api_events (application, type, stream, document_id, person_id, data)
    VALUES (a.application, 'document.read', 'document:' || d.id, d.id, d.person_id,
            api_document_event(a, d, jsonb_build_object(
                'state', 'delivered', 'read_at', last_part.read_at)));
END
$$;

CREATE FUNCTION record_api_document_events() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    a api_documents%ROWTYPE;
BEGIN
    SELECT * INTO a FROM api_documents x
    WHERE x.document_id = NEW.id
      AND EXISTS (SELECT 1 FROM api_endpoints e
                  WHERE e.application = x.application AND e.removed_at IS NULL)
    FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    IF OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL THEN
        INSERT INTO api_events (application, type, stream, document_id, person_id, data)
        VALUES (a.application, 'document.delivered', 'document:' || NEW.id, NEW.id,
                NEW.person_id,
                api_document_event(a, NEW, jsonb_build_object(
                    'state', 'delivered', 'delivered_at', NEW.delivered_at,
                    'parts', (SELECT count(*) FROM delivery_chunks c
                              WHERE c.document_id = NEW.id))));
        PERFORM tell_api_read(a, NEW);
    END IF;
    IF OLD.awaiting_reply_since IS NULL AND NEW.awaiting_reply_since IS NOT NULL
       AND NEW.abandoned_at IS NULL THEN
        INSERT INTO api_events (application, type, stream, document_id, person_id, data)
        VALUES (a.application, 'document.awaiting_reply', 'document:' || NEW.id, NEW.id,
                NEW.person_id,
                api_document_event(a, NEW, jsonb_build_object(
                    'state', 'awaiting_reply', 'since', NEW.awaiting_reply_since,
                    'knocked_at', NEW.knock_sent_at)));
    END IF;
    IF OLD.abandoned_at IS NULL AND NEW.abandoned_at IS NOT NULL THEN
        INSERT INTO api_events (application, type, stream, document_id, person_id, data)
        VALUES (a.application, 'document.abandoned', 'document:' || NEW.id, NEW.id,
                NEW.person_id,
                api_document_event(a, NEW, jsonb_build_object(
                    'state', 'abandoned', 'abandoned_at', NEW.abandoned_at,
                    'reason', NEW.abandon_reason)));
    END IF;
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_api_events
    AFTER UPDATE OF delivered_at, awaiting_reply_since, abandoned_at ON documents
    FOR EACH ROW WHEN ((OLD.delivered_at IS NULL AND NEW.delivered_at IS NOT NULL)
                       OR (OLD.awaiting_reply_since IS NULL AND NEW.awaiting_reply_since IS NOT NULL)
                       OR (OLD.abandoned_at IS NULL AND NEW.abandoned_at IS NOT NULL))
    EXECUTE FUNCTION record_api_document_events();

CREATE FUNCTION record_api_read_event() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    a api_documents%ROWTYPE;
    d documents%ROWTYPE;
BEGIN
    -- only the last part's reading tells
    IF EXISTS (SELECT 1 FROM delivery_chunks c
               WHERE c.document_id = NEW.document_id AND c.chunk_index > NEW.chunk_index) THEN
        RETURN NULL;
    END IF;
    SELECT * INTO a FROM api_documents x
    WHERE x.document_id = NEW.document_id
      AND EXISTS (SELECT 1 FROM api_endpoints e
                  WHERE e.application = x.application AND e.removed_at IS NULL)
    FOR UPDATE OF x;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    -- a statement after the lock reads the newest committed document
    SELECT * INTO d FROM documents WHERE id = NEW.document_id;
    PERFORM tell_api_read(a, d);
    RETURN NULL;
END
$$;

CREATE TRIGGER delivery_chunks_api_read
    AFTER UPDATE OF read_at ON delivery_chunks
    FOR EACH ROW WHEN (OLD.read_at IS NULL AND NEW.read_at IS NOT NULL)
    EXECUTE FUNCTION record_api_read_event();

-- person.opted_out, to every application that knows the person: the
-- platform says they stopped our messages (131050), or they pressed Stop.
CREATE FUNCTION record_api_person_events() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
DECLARE
    via text := CASE WHEN OLD.opted_out_at IS NULL AND NEW.opted_out_at IS NOT NULL
                     THEN 'platform' ELSE 'stop' END;
BEGIN
    INSERT INTO api_events (application, type, stream, person_id, data)
    SELECT p.application, 'person.opted_out', 'person:' || NEW.id, NEW.id,
           jsonb_build_object(
               'person', jsonb_build_object('id', NEW.id, 'key', p.user_key),
               'via', via,
               'opted_out_at', CASE via WHEN 'platform' THEN NEW.opted_out_at
                                        ELSE NEW.knocks_stopped_at END)
    FROM api_people p JOIN api_endpoints e ON e.application = p.application
    WHERE p.person_id = NEW.id AND e.removed_at IS NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER people_api_events
    AFTER UPDATE OF opted_out_at, knocks_stopped_at ON people
    FOR EACH ROW WHEN ((OLD.opted_out_at IS NULL AND NEW.opted_out_at IS NOT NULL)
                       OR (OLD.knocks_stopped_at IS NULL AND NEW.knocks_stopped_at IS NOT NULL))
    EXECUTE FUNCTION record_api_person_events();

CREATE TABLE api_rate_limits (
    -- '<application>:<the token's fingerprint>' (never the token)
    bucket text PRIMARY KEY,
    -- the theoretical arrival time of the next request (GCRA)
    tat    timestamptz NOT NULL
);
