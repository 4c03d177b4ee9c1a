-- Queries of the webhook service: inbound messages, statuses, raw bodies.

-- name: insert_inbound
-- Store an inbound message once by its platform id; no row back means we had it already.
INSERT INTO inbound_messages (wa_message_id, person_id, from_number, from_user_id, message_type,
                              body, sent_at, unknown_sender, payload, to_phone_number_id)
VALUES (%(wa_message_id)s, %(person_id)s, %(from_number)s, %(from_user_id)s, %(message_type)s,
        %(body)s, %(sent_at)s, %(unknown_sender)s, %(payload)s, %(to_phone_number_id)s)
ON CONFLICT (wa_message_id) DO NOTHING
RETURNING wa_message_id

-- name: apply_statuses
-- A batch of statuses in one statement: each (message id, status) stored once; the
-- new ones fill delivered/read times of their chunk (set once, never moved back;
-- read implies delivered) and settle chunks whose send outcome we did not know
-- (their callback tag names the chunk's current attempt; document_id and
-- chunk_index are the tag's, as the caller read it: the ledger's primary key).
-- The two updates touch disjoint rows: a chunk is known by its message id, or
-- ambiguous without one. Returns the new statuses, and the documents whose
-- chunks were settled.
WITH incoming AS (
    SELECT * FROM jsonb_to_recordset(%(events)s::jsonb) AS
        e(wa_message_id text, status text, occurred_at timestamptz, recipient_id text,
          callback_data text, document_id bigint, chunk_index integer, error_code integer,
          error_title text, payload jsonb)
),
tags AS (
    SELECT DISTINCT callback_data, document_id, chunk_index
    FROM incoming WHERE document_id IS NOT NULL
),
inserted AS (
    INSERT INTO status_events (wa_message_id, status, occurred_at, recipient_id, callback_data,
                               error_code, error_title, payload)
    SELECT wa_message_id, status, occurred_at, recipient_id, callback_data, error_code,
           error_title, payload
    FROM incoming ORDER BY wa_message_id, status
    ON CONFLICT (wa_message_id, status) DO NOTHING
    RETURNING wa_message_id, status, occurred_at, callback_data
),
progress AS (
    SELECT wa_message_id, max(callback_data) AS callback_data, min(occurred_at) AS first_at,
           min(occurred_at) FILTER (WHERE status IN ('delivered', 'read')) AS delivered_at,
           min(occurred_at) FILTER (WHERE status = 'read') AS read_at
    FROM inserted WHERE status IN ('sent', 'delivered', 'read')
    GROUP BY wa_message_id
),
settled AS (
    UPDATE delivery_chunks c
    SET state = 'sent', wa_message_id = p.wa_message_id, sent_at = coalesce(c.sent_at, p.first_at),
        unknown_since = NULL, delivered_at = coalesce(c.delivered_at, p.delivered_at),
        read_at = coalesce(c.read_at, p.read_at)
    FROM progress p JOIN tags t ON t.callback_data = p.callback_data
    WHERE c.document_id = t.document_id AND c.chunk_index = t.chunk_index
      AND c.callback_data = p.callback_data AND c.state IN ('sending', 'unknown')
      AND c.wa_message_id IS NULL
    RETURNING c.document_id
),
delivered AS (
    UPDATE delivery_chunks c
    SET delivered_at = coalesce(c.delivered_at, p.delivered_at), read_at = coalesce(c.read_at, p.read_at)
    FROM progress p
    WHERE c.wa_message_id = p.wa_message_id AND p.delivered_at IS NOT NULL
    RETURNING c.document_id
)
SELECT wa_message_id, status, NULL::bigint AS settled_document_id FROM inserted
UNION ALL
SELECT NULL, NULL, document_id FROM settled

-- name: resume_documents
-- Settled chunks: let delivery continue now instead of after the grace period.
UPDATE documents SET next_attempt_at = now()
WHERE id = ANY(%(document_ids)s) AND delivered_at IS NULL AND abandoned_at IS NULL
  AND claim_token IS NULL

-- name: chunk_by_wamid
-- The chunk a message id belongs to.
SELECT c.document_id, c.chunk_index, c.state, c.callback_data, d.person_id, d.delivery_attempts,
       d.phone_number_id, d.way, d.file_template, d.file_template_language
FROM delivery_chunks c JOIN documents d ON d.id = c.document_id
WHERE c.wa_message_id = %(wa_message_id)s

-- name: chunk_by_callback
-- The chunk a callback tag names, only if the tag is its current send attempt's.
SELECT c.document_id, c.chunk_index, c.state, c.callback_data, d.person_id, d.delivery_attempts,
       d.phone_number_id, d.way, d.file_template, d.file_template_language
FROM delivery_chunks c JOIN documents d ON d.id = c.document_id
WHERE c.document_id = %(document_id)s AND c.chunk_index = %(chunk_index)s
  AND c.callback_data = %(callback_data)s

-- name: chunk_refused
-- The platform accepted the chunk, then failed it: it never arrived.
UPDATE delivery_chunks
SET state = 'failed', failed_at = coalesce(failed_at, %(at)s), error_code = %(error_code)s
WHERE document_id = %(document_id)s AND chunk_index = %(chunk_index)s
  AND callback_data = %(callback_data)s AND delivered_at IS NULL AND read_at IS NULL
RETURNING document_id

-- name: undeliver_document
-- A chunk of this document never arrived: it is not delivered; try again after
-- %(delay_seconds)s. %(attempt)s is 1 when the failure counts against
-- DELIVERY_MAX_ATTEMPTS (as the same error on the send call would), else 0.
-- An attempt is one pass over the document's unsent chunks: the first chunk of
-- a pass to fail counts, others of the same pass (still 'failed', not resent
-- since) do not. Returns the attempts counted so far. chunk_failures moves so
-- that a sender finishing the document meanwhile sees this (sql/migrations/028).
UPDATE documents d
SET delivered_at = NULL, last_delivery_error = %(error)s, chunk_failures = d.chunk_failures + 1,
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    delivery_attempts = d.delivery_attempts + CASE
        WHEN %(attempt)s = 1 AND NOT EXISTS (
            SELECT 1 FROM delivery_chunks c
            WHERE c.document_id = d.id AND c.state = 'failed'
              AND c.chunk_index <> %(chunk_index)s)
        THEN 1 ELSE 0 END
WHERE d.id = %(document_id)s AND d.abandoned_at IS NULL
RETURNING d.delivery_attempts

-- name: abandon_document_async
-- A status says this recipient cannot get the document: stop, whoever holds it.
UPDATE documents
SET abandoned_at = now(), abandon_reason = %(reason)s, delivered_at = NULL,
    last_delivery_error = %(error)s, claim_token = NULL, claimed_at = NULL
WHERE id = %(document_id)s AND abandoned_at IS NULL
RETURNING id

-- name: settle_knock
-- A status for a knock whose send response was lost: remember its id. Only
-- then: every status of every knock comes here, and a needless update would
-- lock the document just when the reply's targeted sweep tries to claim it
-- (SKIP LOCKED), leaving it to the heartbeat.
UPDATE documents SET knock_message_id = %(wa_message_id)s
WHERE id = %(document_id)s AND knock_sent_at IS NOT NULL AND knock_message_id IS NULL

-- name: insert_raw_webhook
-- Keep a body we accepted but could not (fully) use, for inspection: once by its SHA-256 (sql/migrations/017); a replay counts and refreshes it (last_received_at, the latest reason) instead of storing another copy.
INSERT INTO raw_webhooks (reason, body) VALUES (%(reason)s, %(body)s)
ON CONFLICT (body_sha256) DO UPDATE
SET received_count = raw_webhooks.received_count + 1, last_received_at = now(),
    reason = EXCLUDED.reason
RETURNING id, received_count

-- name: health
-- Is the database reachable, and migrated?
SELECT max(version) AS schema_version FROM schema_migrations
