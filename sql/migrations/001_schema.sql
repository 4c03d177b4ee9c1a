-- 001: people, documents (generation + delivery state), chunk ledger,
-- inbound messages, status events, raw webhooks, ops alerts, sender state,
-- and the single eligibility definition.

CREATE TABLE people (
    id               bigserial PRIMARY KEY,
    -- E.164 with the leading '+'; NULL for people only known by a username.
    phone            text UNIQUE CHECK (phone ~ '^\+[1-9][0-9]{6,14}$'),
    name             text NOT NULL DEFAULT '',
    locale           text NOT NULL DEFAULT 'en' CHECK (locale IN ('en', 'es', 'pt')),
    time_zone        text NOT NULL DEFAULT 'UTC',
    brief_opt_in     boolean NOT NULL DEFAULT false,
    brief_local_time time NOT NULL DEFAULT '07:00',
    opted_out_at     timestamptz,
    last_inbound_at  timestamptz,
    -- the last knock (template) sent to this person, whatever the document:
    -- no second knock within 24 h.
    last_knock_at    timestamptz,
    -- the platform refused free-form (131047) although our clock said the
    -- window was open: closed until the person writes again.
    window_refused_at timestamptz,
    created_at       timestamptz NOT NULL DEFAULT now()
);

-- A time zone Postgres does not know would break every local-date
-- computation for that person; refuse it at the door.
CREATE FUNCTION is_valid_time_zone(tz text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = tz)
$$;
ALTER TABLE people ADD CONSTRAINT people_time_zone_valid CHECK (is_valid_time_zone(time_zone));

CREATE TABLE documents (
    id                     bigserial PRIMARY KEY,
    person_id              bigint NOT NULL REFERENCES people (id),
    kind                   text NOT NULL CHECK (kind IN ('plan', 'daily_brief')),
    -- the day a brief describes, in the person's time zone
    for_date               date,
    created_at             timestamptz NOT NULL DEFAULT now(),

    -- generation (owner: the generator)
    status                 text NOT NULL DEFAULT 'pending'
                           CHECK (status IN ('pending', 'generating', 'succeeded', 'failed')),
    body                   text,
    generated_at           timestamptz,
    generation_attempts    integer NOT NULL DEFAULT 0,
    generation_error       text,
    generation_claim_token uuid,
    generation_claimed_at  timestamptz,
    next_generation_at     timestamptz NOT NULL DEFAULT now(),

    -- delivery (owner: the delivery engine)
    delivered_at           timestamptz,
    delivery_attempts      integer NOT NULL DEFAULT 0,
    last_delivery_error    text,
    next_attempt_at        timestamptz NOT NULL DEFAULT now(),
    -- the chunk size used at the first send; fixed so that a resumed
    -- delivery cuts the body at the same places even if the setting changed.
    chunk_limit            integer,
    claim_token            uuid,
    claimed_at             timestamptz,
    knock_sent_at          timestamptz,
    knock_message_id       text,
    -- set when the window is closed and we wait for the person to write;
    -- such a document is outside the queue index (see documents_queue).
    awaiting_reply_since   timestamptz,
    abandoned_at           timestamptz,
    abandon_reason         text CHECK (abandon_reason IN
                           ('stale', 'undeliverable', 'opted_out', 'max_attempts',
                            'unknown_outcome', 'unreachable', 'operator')),

    CHECK (kind <> 'daily_brief' OR for_date IS NOT NULL),
    CHECK (status <> 'succeeded' OR body IS NOT NULL),
    CHECK ((abandoned_at IS NULL) = (abandon_reason IS NULL)),
    CHECK (delivered_at IS NULL OR abandoned_at IS NULL)
);

CREATE UNIQUE INDEX documents_one_brief_per_day
    ON documents (person_id, for_date) WHERE kind = 'daily_brief';

-- The queue: succeeded, not delivered, not abandoned, and not waiting on the
-- person. Keyed on next_attempt_at so the time condition is an index range.
CREATE INDEX documents_queue ON documents (next_attempt_at)
    WHERE status = 'succeeded' AND delivered_at IS NULL AND abandoned_at IS NULL
      AND awaiting_reply_since IS NULL;

-- Waiting on a reply, by person (the inbound handler puts them back).
CREATE INDEX documents_awaiting_reply ON documents (person_id)
    WHERE awaiting_reply_since IS NOT NULL AND delivered_at IS NULL AND abandoned_at IS NULL;

-- Generation's own queue.
CREATE INDEX documents_generation_queue ON documents (next_generation_at)
    WHERE status IN ('pending', 'generating');

CREATE INDEX documents_person ON documents (person_id);

-- One row per message of a document. state:
--   sending  fenced, the request may or may not have left (a crash leaves it)
--   sent     accepted by the platform (wa_message_id known or settled later)
--   failed   definitely not accepted, or refused later (async failed status)
--   unknown  the request left and no answer came (timeout, dropped connection)
CREATE TABLE delivery_chunks (
    document_id     bigint NOT NULL REFERENCES documents (id),
    chunk_index     integer NOT NULL CHECK (chunk_index >= 0),
    state           text NOT NULL CHECK (state IN ('sending', 'sent', 'failed', 'unknown')),
    callback_data   text NOT NULL,
    wa_message_id   text UNIQUE,
    send_attempts   integer NOT NULL DEFAULT 1,
    started_at      timestamptz NOT NULL DEFAULT now(),
    sent_at         timestamptz,
    unknown_since   timestamptz,
    delivered_at    timestamptz,
    read_at         timestamptz,
    failed_at       timestamptz,
    error_code      integer,
    PRIMARY KEY (document_id, chunk_index)
);
CREATE INDEX delivery_chunks_callback ON delivery_chunks (callback_data);

-- Inbound messages, once each (webhooks are retried).
CREATE TABLE inbound_messages (
    wa_message_id  text PRIMARY KEY,
    person_id      bigint REFERENCES people (id),
    from_number    text,
    from_user_id   text,
    message_type   text NOT NULL,
    body           text,
    sent_at        timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    unknown_sender boolean NOT NULL DEFAULT false,
    payload        jsonb NOT NULL
);
CREATE INDEX inbound_messages_person ON inbound_messages (person_id, sent_at);

-- Status webhooks, once per (message id, status).
CREATE TABLE status_events (
    wa_message_id  text NOT NULL,
    status         text NOT NULL,
    occurred_at    timestamptz NOT NULL,
    received_at    timestamptz NOT NULL DEFAULT now(),
    recipient_id   text,
    callback_data  text,
    error_code     integer,
    error_title    text,
    payload        jsonb NOT NULL,
    PRIMARY KEY (wa_message_id, status)
);

-- Every webhook body we accepted but could not use (malformed JSON, unknown
-- shape, unhandled fields) is kept raw for inspection.
CREATE TABLE raw_webhooks (
    id          bigserial PRIMARY KEY,
    received_at timestamptz NOT NULL DEFAULT now(),
    reason      text NOT NULL,
    body        bytea NOT NULL
);

-- Ops alerts: what, when, whether it reached the ops channel.
CREATE TABLE ops_alerts (
    id           bigserial PRIMARY KEY,
    dedup_key    text NOT NULL,
    severity     text NOT NULL CHECK (severity IN ('info', 'warning', 'error')),
    kind         text NOT NULL DEFAULT 'alert' CHECK (kind IN ('alert', 'reminder', 'resolved')),
    message      text NOT NULL,
    details      jsonb NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    sent_at      timestamptz,
    send_attempts integer NOT NULL DEFAULT 0,
    last_send_error text
);
CREATE INDEX ops_alerts_dedup ON ops_alerts (dedup_key, created_at DESC);
CREATE INDEX ops_alerts_unsent ON ops_alerts (created_at) WHERE sent_at IS NULL;

-- Global sender state: a global error (expired token, unknown phone number
-- id, missing template, restricted account) pauses sending for everyone.
CREATE TABLE sender_state (
    id           boolean PRIMARY KEY DEFAULT true CHECK (id),
    paused_at    timestamptz,
    pause_code   integer,
    pause_reason text,
    resumed_at   timestamptz
);
INSERT INTO sender_state (id) VALUES (true);

-- (Restated over the in_queue column by 006_queue_flag.sql, which is now the
-- definition in force.)
-- THE eligibility definition: which documents a sweep would act on now, and
-- what it would do. The sweep selects from it and the heartbeat guard asks
-- EXISTS on it. It reads only rows of the documents_queue partial index
-- (awaiting-reply documents are outside it), with the time condition as a
-- range on the index key, so the guard costs the same however many
-- documents wait on a person. It is a SQL function (inlined by the planner)
-- only because lease and window are settings.
--   action = 'abandon_unreachable'  no number, or opted out
--            'abandon_stale'        a brief for a day already over for the person
--            'deliver'              window open: send the chunks
--            'knock'                window closed: knock (or wait for the reply)
CREATE FUNCTION eligible_documents(lease interval, service_window interval)
RETURNS TABLE (id bigint, person_id bigint, kind text, next_attempt_at timestamptz, action text)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.person_id, d.kind, d.next_attempt_at,
           CASE
               WHEN p.phone IS NULL OR p.opted_out_at IS NOT NULL THEN 'abandon_unreachable'
               WHEN d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE p.time_zone)::date THEN 'abandon_stale'
               WHEN p.last_inbound_at > now() - service_window
                    AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity') THEN 'deliver'
               ELSE 'knock'
           END
    FROM documents d
    JOIN people p ON p.id = d.person_id
    WHERE d.status = 'succeeded' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
      AND d.awaiting_reply_since IS NULL
      AND d.next_attempt_at <= now()
      AND (d.claim_token IS NULL OR d.claimed_at < now() - lease)
$$;

-- One state per document, with the time it entered that state: the backlog,
-- the checks and `delivery-pipeline status` all read this.
CREATE VIEW document_states AS
SELECT d.id, d.person_id, d.kind, d.for_date, d.abandon_reason,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN 'abandoned'
           WHEN d.delivered_at IS NOT NULL THEN 'delivered'
           WHEN d.status = 'pending' THEN 'pending'
           WHEN d.status = 'generating' THEN 'generating'
           WHEN d.status = 'failed' THEN 'generation_failed'
           WHEN d.awaiting_reply_since IS NOT NULL THEN 'awaiting_reply'
           ELSE 'undelivered'
       END AS state,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN d.abandoned_at
           WHEN d.delivered_at IS NOT NULL THEN d.delivered_at
           WHEN d.status IN ('pending', 'failed') THEN d.created_at
           WHEN d.status = 'generating' THEN coalesce(d.generation_claimed_at, d.created_at)
           WHEN d.awaiting_reply_since IS NOT NULL THEN d.awaiting_reply_since
           ELSE coalesce(d.generated_at, d.created_at)
       END AS since
FROM documents d;
