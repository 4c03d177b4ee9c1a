-- The backlog the Dagster UI shows: read from the document_states view (001),
-- the one definition of which state a document is in.

-- name: backlog_by_state
-- Count and oldest age (seconds) per waiting state, plus documents delivered and abandoned (by reason) since the start of today, UTC.
SELECT state,
       coalesce(abandon_reason, '') AS reason,
       count(*) AS count,
       extract(epoch FROM now() - min(since))::float8 AS oldest_age_seconds
FROM document_states
WHERE state IN ('pending', 'generating', 'awaiting_review', 'undelivered', 'awaiting_reply',
                'quiet_hours', 'generation_failed')
   OR since >= date_trunc('day', now(), 'UTC')
GROUP BY state, coalesce(abandon_reason, '')
ORDER BY state, reason

-- name: heartbeat_idle
-- Why the heartbeat finds nothing eligible, from the queue's partial index and the pause table: documents in the queue (not waiting on a reply or a reviewer), how many hold their knock for a template or wait for the end of quiet hours, the next due time; whether sending is paused for every number (its cause, the next probe) and how many numbers are paused on their own.
SELECT count(q.id)::int AS queued,
       count(q.id) FILTER (WHERE q.knock_held_since IS NOT NULL)::int AS knock_held,
       count(q.id) FILTER (WHERE q.quiet_until > now())::int AS quiet,
       min(q.next_attempt_at) AS next_due,
       s.paused_at, s.pause_code, s.pause_reason, s.next_probe_at,
       (SELECT count(*) FROM sender_state n
        WHERE n.paused_at IS NOT NULL AND n.phone_number_id <> '*')::int AS numbers_paused
FROM (SELECT 1) AS one
LEFT JOIN documents q ON q.in_queue
LEFT JOIN sender_state s ON s.phone_number_id = '*'
GROUP BY s.paused_at, s.pause_code, s.pause_reason, s.next_probe_at
