-- 020: the knock is a message of its own, watched like a chunk; the knock
-- templates have a lifecycle the platform announces by webhook.
--
-- A knock was two columns of its document (knock_sent_at, knock_message_id):
-- nothing recorded which template it used, whether the platform refused it
-- later, or that it was never delivered. A knock is now a row of `knocks`,
-- linked to the document(s) it asks about through `knock_documents`: one
-- knock may cover several documents of the same person (a digest knock, a
-- reminder), so nothing here assumes one document per knock. The two
-- document columns stay, written as before, for what already reads them.

CREATE TABLE knocks (
    id                bigserial PRIMARY KEY,
    person_id         bigint NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    template          text NOT NULL,
    language          text NOT NULL,
    -- sending: fenced, the request may have left; sent: accepted (wa_message_id);
    -- unknown: the request left and no answer came (counted as sent);
    -- refused: the send call was refused; failed: a failed status came later.
    state             text NOT NULL DEFAULT 'sending'
        CHECK (state IN ('sending', 'sent', 'unknown', 'refused', 'failed')),
    wa_message_id     text UNIQUE,
    sent_at           timestamptz NOT NULL DEFAULT now(),
    delivered_at      timestamptz,
    read_at           timestamptz,
    failed_at         timestamptz,
    error_code        integer,
    error             text,
    -- The person's 24 h knock reservation this knock took (people.last_knock_at
    -- before and after), so a knock the platform refused can give it back.
    reserved_at       timestamptz,
    previous_knock_at timestamptz
);

-- The knocks whose delivery is still unconfirmed: the knock_not_delivered check.
CREATE INDEX knocks_unconfirmed ON knocks (sent_at)
    WHERE delivered_at IS NULL AND read_at IS NULL AND failed_at IS NULL;
CREATE INDEX knocks_person ON knocks (person_id, sent_at);

CREATE TABLE knock_documents (
    knock_id    bigint NOT NULL REFERENCES knocks (id) ON DELETE CASCADE,
    document_id bigint NOT NULL REFERENCES documents (id) ON DELETE CASCADE,
    PRIMARY KEY (knock_id, document_id)
);
CREATE INDEX knock_documents_document ON knock_documents (document_id, knock_id);

-- A document whose knock waits for a healthy template (owner: the template).
-- It stays in the queue, due again when a template recovers (the webhook
-- wakes it) or at the next recheck, whichever comes first.
ALTER TABLE documents ADD COLUMN knock_held_since timestamptz;

-- ── templates ───────────────────────────────────────────────────────────

-- What the platform last told us about each template and language, from the
-- three lifecycle webhooks, and what our own sends learned (a 132015 before
-- the webhook arrived). NULL: never heard of; an unknown template is assumed
-- approved (the send says otherwise soon enough).
CREATE TABLE message_templates (
    name                text NOT NULL,
    language            text NOT NULL,
    template_id         text,
    status              text,          -- APPROVED, PAUSED, DISABLED, FLAGGED, REJECTED, …
    status_at           timestamptz,   -- the event's time (entry.time)
    status_reason       text,
    pause_count         integer NOT NULL DEFAULT 0,
    paused_until        timestamptz,   -- a pause ends by itself: 3 h, then 6 h
    disable_date        text,          -- FLAGGED: when it will be disabled, as Meta wrote it
    quality             text,          -- GREEN, YELLOW, RED, UNKNOWN
    quality_at          timestamptz,
    category            text,          -- UTILITY, MARKETING, AUTHENTICATION
    category_at         timestamptz,
    announced_category  text,          -- an announced re-categorisation, not yet in force
    announced_at        timestamptz,
    announced_effective_at timestamptz,
    -- Our sends' own evidence: a refusal naming the template, until when we
    -- believe it (then a send tries again).
    refused_code        integer,
    refused_at          timestamptz,
    refused_until       timestamptz,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (name, language)
);

-- Every lifecycle webhook as it came, once: Meta redelivers, and duplicates
-- happen anyway. The key is the change itself (field, template, what it says,
-- the entry's time), so a replay is a no-op and the state is applied once.
CREATE TABLE template_events (
    field        text NOT NULL,
    name         text NOT NULL,
    language     text NOT NULL,
    event        text NOT NULL,
    occurred_at  timestamptz NOT NULL,
    received_at  timestamptz NOT NULL DEFAULT now(),
    payload      jsonb NOT NULL,
    PRIMARY KEY (field, name, language, event, occurred_at)
);
CREATE INDEX template_events_received ON template_events (received_at);

-- Health of a template for a knock, in one place (queries, checks, status):
-- 'ok', or the first problem: 'paused' (until paused_until), 'disabled',
-- 'rejected', 'refused' (a send was refused naming it, until refused_until),
-- 'not_utility' (re-categorised), 'flagged', 'quality_red'. Sendable: a knock
-- may still use it when nothing better is left (flagged, RED and marketing
-- templates still send; paused, disabled, refused ones do not).
CREATE FUNCTION template_problem(t message_templates) RETURNS text
LANGUAGE sql STABLE AS $$
    SELECT CASE
        WHEN t.name IS NULL THEN 'ok'
        WHEN t.status = 'DISABLED' THEN 'disabled'
        WHEN t.status IN ('REJECTED', 'PENDING_DELETION', 'DELETED') THEN lower(t.status)
        WHEN t.status = 'PAUSED' AND coalesce(t.paused_until, 'infinity') > now() THEN 'paused'
        WHEN t.refused_until > now() THEN 'refused'
        WHEN t.category IS NOT NULL AND t.category <> 'UTILITY' THEN 'not_utility'
        WHEN t.status = 'FLAGGED' THEN 'flagged'
        WHEN t.quality = 'RED' THEN 'quality_red'
        ELSE 'ok'
    END
$$;

CREATE FUNCTION template_sendable(t message_templates) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT template_problem(t) IN ('ok', 'not_utility', 'flagged', 'quality_red')
$$;

-- One state per document (restated from 013) with 'knock_held', owner: the
-- template. Held documents are in the queue, due at their next recheck.
CREATE OR REPLACE VIEW document_states AS
SELECT d.id, d.person_id, d.kind, d.for_date, d.abandon_reason,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN 'abandoned'
           WHEN d.delivered_at IS NOT NULL THEN 'delivered'
           WHEN d.status = 'pending' THEN 'pending'
           WHEN d.status = 'generating' THEN 'generating'
           WHEN d.status = 'failed' THEN 'generation_failed'
           WHEN d.awaiting_review_since IS NOT NULL THEN 'awaiting_review'
           WHEN d.awaiting_reply_since IS NOT NULL THEN 'awaiting_reply'
           WHEN d.knock_held_since IS NOT NULL THEN 'knock_held'
           WHEN d.quiet_until > now() THEN 'quiet_hours'
           ELSE 'undelivered'
       END AS state,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN d.abandoned_at
           WHEN d.delivered_at IS NOT NULL THEN d.delivered_at
           WHEN d.status IN ('pending', 'failed') THEN d.created_at
           WHEN d.status = 'generating' THEN coalesce(d.generation_claimed_at, d.created_at)
           WHEN d.awaiting_review_since IS NOT NULL THEN d.awaiting_review_since
           WHEN d.awaiting_reply_since IS NOT NULL THEN d.awaiting_reply_since
           WHEN d.knock_held_since IS NOT NULL THEN d.knock_held_since
           ELSE coalesce(d.reviewed_at, d.generated_at, d.created_at)
       END AS since
FROM documents d;
