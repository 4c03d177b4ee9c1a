-- History kept for a while, not forever (store/retention.py; the indexes are
-- sql/migrations/017's). Each prune looks at the %(limit)s oldest rows older than
-- %(keep)s that come after the key the previous batch ended on
-- (%(after_at)s, %(after_key)s, %(after_sub)s; NULL: from the oldest), deletes
-- those nothing still reads (by their ctid: a bounded TID scan, and a row
-- changed since the batch read it is skipped, to be looked at again next
-- run), and returns how many went, how many it looked at and the key to
-- continue after: so a row that must stay is looked at once a run, not once
-- a batch. One statement, one short transaction per batch.

-- name: prune_raw_webhooks
-- Raw bodies last received before now() - %(keep)s: kept for people to inspect, read by no code. A body replayed meanwhile (a newer row version) stays.
WITH batch AS (
    SELECT ctid AS row_id, last_received_at, id FROM raw_webhooks
    WHERE last_received_at < now() - %(keep)s
      AND (last_received_at, id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
                                    coalesce(%(after_key)s::bigint, 0))
    ORDER BY last_received_at, id
    LIMIT %(limit)s
),
gone AS (
    DELETE FROM raw_webhooks WHERE ctid = ANY (ARRAY(SELECT row_id FROM batch)) RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS examined,
       last.last_received_at AS after_at, last.id AS after_key, NULL::text AS after_sub
FROM (SELECT) one
LEFT JOIN LATERAL (
    SELECT last_received_at, id FROM batch ORDER BY last_received_at DESC, id DESC LIMIT 1
) last ON true

-- name: prune_status_events
-- Statuses received before now() - %(keep)s, except those of a knock (documents.knock_message_id, or a row of knocks with its documents) one of whose documents still waits on its person; the checks and the report read only the last day's and a day's knocks, and a chunk's delivered/read times are on the chunk.
WITH batch AS (
    SELECT s.ctid AS row_id, s.received_at, s.wa_message_id, s.status,
           NOT EXISTS (
               SELECT 1 FROM documents d
               WHERE d.knock_message_id = s.wa_message_id AND d.knock_message_id IS NOT NULL
                 AND d.awaiting_reply_since IS NOT NULL AND d.delivered_at IS NULL
                 AND d.abandoned_at IS NULL
           ) AND NOT EXISTS (
               SELECT 1 FROM knocks k
               JOIN knock_documents kd ON kd.knock_id = k.id
               JOIN documents d ON d.id = kd.document_id
               WHERE k.wa_message_id = s.wa_message_id
                 AND d.awaiting_reply_since IS NOT NULL AND d.delivered_at IS NULL
                 AND d.abandoned_at IS NULL
           ) AS unread
    FROM status_events s
    WHERE s.received_at < now() - %(keep)s
      AND (s.received_at, s.wa_message_id, s.status)
          > (coalesce(%(after_at)s::timestamptz, '-infinity'), coalesce(%(after_key)s::text, ''),
             coalesce(%(after_sub)s::text, ''))
    ORDER BY s.received_at, s.wa_message_id, s.status
    LIMIT %(limit)s
),
gone AS (
    DELETE FROM status_events WHERE ctid = ANY (ARRAY(SELECT row_id FROM batch WHERE unread))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS examined,
       last.received_at AS after_at, last.wa_message_id AS after_key, last.status AS after_sub
FROM (SELECT) one
LEFT JOIN LATERAL (
    SELECT received_at, wa_message_id, status FROM batch
    ORDER BY received_at DESC, wa_message_id DESC, status DESC LIMIT 1
) last ON true

-- name: prune_inbound_messages
-- Inbound messages received before now() - %(keep)s, except each person's newest: the message their window (people.last_inbound_at) and an unanswered knock's wait go back to. Messages of unknown senders go by age alone.
WITH batch AS (
    SELECT i.ctid AS row_id, i.received_at, i.wa_message_id,
           i.person_id IS NULL OR EXISTS (
               SELECT 1 FROM inbound_messages n
               WHERE n.person_id = i.person_id
                 AND (n.sent_at, n.wa_message_id) > (i.sent_at, i.wa_message_id)
           ) AS unread
    FROM inbound_messages i
    WHERE i.received_at < now() - %(keep)s
      AND (i.received_at, i.wa_message_id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
                                              coalesce(%(after_key)s::text, ''))
    ORDER BY i.received_at, i.wa_message_id
    LIMIT %(limit)s
),
gone AS (
    DELETE FROM inbound_messages WHERE ctid = ANY (ARRAY(SELECT row_id FROM batch WHERE unread))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS examined,
       last.received_at AS after_at, last.wa_message_id AS after_key, NULL::text AS after_sub
FROM (SELECT) one
LEFT JOIN LATERAL (
    SELECT received_at, wa_message_id FROM batch
    ORDER BY received_at DESC, wa_message_id DESC LIMIT 1
) last ON true

-- name: prune_ops_alerts
-- Alerts created before now() - %(keep)s, except the rows of a check's episode that is still open (no resolved row for its key at or after them, ops_alerts_resolved): its newest row decides whether the check is alerting, at what severity and when to remind. One-shot alerts go by age (their dedup reads an hour back; unsent ones are retried for a day).
WITH batch AS (
    SELECT a.ctid AS row_id, a.created_at, a.id,
           NOT a.episode OR EXISTS (
               SELECT 1 FROM ops_alerts r
               WHERE r.kind = 'resolved' AND r.dedup_key = a.dedup_key
                 AND (r.created_at, r.id) >= (a.created_at, a.id)
           ) AS unread
    FROM ops_alerts a
    WHERE a.created_at < now() - %(keep)s
      AND (a.created_at, a.id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
                                  coalesce(%(after_key)s::bigint, 0))
    ORDER BY a.created_at, a.id
    LIMIT %(limit)s
),
gone AS (
    DELETE FROM ops_alerts WHERE ctid = ANY (ARRAY(SELECT row_id FROM batch WHERE unread))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS examined,
       last.created_at AS after_at, last.id AS after_key, NULL::text AS after_sub
FROM (SELECT) one
LEFT JOIN LATERAL (
    SELECT created_at, id FROM batch ORDER BY created_at DESC, id DESC LIMIT 1
) last ON true

-- name: prune_document_files
-- Files rendered before now() - %(keep)s whose document is finished (delivered or abandoned): derived from the body, which stays, and drawn again if ever needed (a resend); their media ids go with them (sql/migrations/037). A file of a document still on its way stays however old.
WITH batch AS (
    SELECT f.ctid AS row_id, f.rendered_at, f.document_id,
           EXISTS (
               SELECT 1 FROM documents d
               WHERE d.id = f.document_id
                 AND (d.delivered_at IS NOT NULL OR d.abandoned_at IS NOT NULL)
           ) AS unread
    FROM document_files f
    WHERE f.rendered_at < now() - %(keep)s
      AND (f.rendered_at, f.document_id) > (coalesce(%(after_at)s::timestamptz, '-infinity'),
                                            coalesce(%(after_key)s::bigint, 0))
    ORDER BY f.rendered_at, f.document_id
    LIMIT %(limit)s
),
gone AS (
    DELETE FROM document_files WHERE ctid = ANY (ARRAY(SELECT row_id FROM batch WHERE unread))
    RETURNING 1
)
SELECT (SELECT count(*) FROM gone) AS deleted, (SELECT count(*) FROM batch) AS examined,
       last.rendered_at AS after_at, last.document_id AS after_key, NULL::text AS after_sub
FROM (SELECT) one
LEFT JOIN LATERAL (
    SELECT rendered_at, document_id FROM batch
    ORDER BY rendered_at DESC, document_id DESC LIMIT 1
) last ON true

-- name: retention_oldest
-- How old the oldest row of each pruned table is now (seconds; NULL: empty), for the job's record.
SELECT (SELECT extract(epoch FROM now() - min(last_received_at)) FROM raw_webhooks)::float8
           AS raw_webhooks,
       (SELECT extract(epoch FROM now() - min(received_at)) FROM status_events)::float8
           AS status_events,
       (SELECT extract(epoch FROM now() - min(received_at)) FROM inbound_messages)::float8
           AS inbound_messages,
       (SELECT extract(epoch FROM now() - min(created_at)) FROM ops_alerts)::float8 AS ops_alerts,
       (SELECT extract(epoch FROM now() - min(rendered_at)) FROM document_files)::float8
           AS document_files
