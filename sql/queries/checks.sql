-- The ops checks on the backlog asset (delivery_pipeline/checks.py), one per
-- waiting state. Each mirrors its state in the document_states view (001) with
-- predicates the partial indexes answer, so a check costs the same however
-- many documents were ever delivered. Each returns the oldest %(sample)s rows,
-- every row carrying the totals (window aggregates run before the LIMIT); no
-- row back means nothing waits.

-- name: check_pending
-- Documents waiting for generation (state 'pending'), oldest first, with the totals past %(warn)s and %(error)s.
WITH waiting AS (
    SELECT id, person_id, kind, generation_attempts, generation_error, created_at AS since
    FROM documents
    WHERE status = 'pending' AND abandoned_at IS NULL AND delivered_at IS NULL
)
SELECT id, person_id, kind, generation_attempts AS attempts, generation_error AS error,
       extract(epoch FROM now() - since)::float8 AS age_seconds,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE since <= now() - %(warn)s) OVER () AS over_warn,
       count(*) FILTER (WHERE since <= now() - %(error)s) OVER () AS over_error
FROM waiting
ORDER BY since, id
LIMIT %(sample)s

-- name: check_generating
-- Documents being generated (state 'generating'), longest-claimed first: a claim older than the thresholds is a dead or stuck worker.
WITH waiting AS (
    SELECT id, person_id, kind, generation_attempts, generation_claimed_at,
           coalesce(generation_claimed_at, created_at) AS since
    FROM documents
    WHERE status = 'generating' AND abandoned_at IS NULL AND delivered_at IS NULL
)
SELECT id, person_id, kind, generation_attempts AS attempts, generation_claimed_at AS claimed_at,
       extract(epoch FROM now() - since)::float8 AS age_seconds,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE since <= now() - %(warn)s) OVER () AS over_warn,
       count(*) FILTER (WHERE since <= now() - %(error)s) OVER () AS over_error
FROM waiting
ORDER BY since, id
LIMIT %(sample)s

-- name: check_undelivered
-- Generated, undelivered documents not waiting on a reply (state 'undelivered'): which the eligibility function says a sweep would take now, for how long they have been due (stranded), and how long since generation (slow, e.g. retrying with backoff). Stranded first, then oldest. A document waiting for another of the person's (before it in their turn) is not eligible, so not stranded; once its turn comes it is due from when the last other one left the queue.
WITH undelivered AS (
    SELECT d.id, d.person_id, d.kind, d.delivery_attempts, d.last_delivery_error,
           -- since generated, or approved by a reviewer (the review's wait is theirs)
           coalesce(d.reviewed_at, d.generated_at, d.created_at) AS since,
           e.id IS NOT NULL AS eligible, e.action,
           -- due since: generated (approved), backoff elapsed, any claim's lease expired, and
           -- (only for the few eligible rows) the person's previous document done
           greatest(coalesce(d.reviewed_at, d.generated_at, d.created_at), d.next_attempt_at,
                    coalesce(d.claimed_at + %(lease)s, '-infinity'),
                    -- any other of theirs: whatever left the queue last went before it
                    -- in their turn (sql/migrations/025: begun, asked for, brief), one at a time
                    CASE WHEN e.id IS NOT NULL THEN (
                        SELECT max(greatest(o.delivered_at, o.abandoned_at, o.awaiting_reply_since))
                        FROM documents o
                        WHERE o.person_id = d.person_id AND o.id <> d.id
                    ) END) AS due_since
    FROM documents d
    LEFT JOIN eligible_documents(%(lease)s, %(service_window)s, %(quiet_hours)s) e ON e.id = d.id
    WHERE d.status = 'succeeded' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
      AND d.awaiting_reply_since IS NULL AND d.awaiting_review_since IS NULL
      AND NOT coalesce(d.quiet_until > now(), false)  -- the clock's, in 'quiet_hours'
)
SELECT id, person_id, kind, eligible, action, delivery_attempts AS attempts,
       last_delivery_error AS error,
       extract(epoch FROM now() - since)::float8 AS age_seconds,
       extract(epoch FROM now() - min(since) OVER ())::float8 AS oldest_age_seconds,
       CASE WHEN eligible THEN extract(epoch FROM now() - due_since)::float8 END
           AS stranded_seconds,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE eligible) OVER () AS eligible_total,
       count(*) FILTER (WHERE eligible AND due_since <= now() - %(warn)s) OVER () AS over_warn,
       count(*) FILTER (WHERE eligible AND due_since <= now() - %(error)s) OVER () AS over_error,
       count(*) FILTER (WHERE since <= now() - %(slow)s) OVER () AS over_slow
FROM undelivered
ORDER BY (eligible AND due_since <= now() - %(warn)s) DESC, since, id
LIMIT %(sample)s

-- name: check_awaiting_review
-- Documents waiting for a reviewer's decision (state 'awaiting_review'), oldest first, with the totals past %(warn)s and %(error)s.
SELECT id, person_id, kind,
       extract(epoch FROM now() - awaiting_review_since)::float8 AS age_seconds,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE awaiting_review_since <= now() - %(warn)s) OVER () AS over_warn,
       count(*) FILTER (WHERE awaiting_review_since <= now() - %(error)s) OVER () AS over_error
FROM documents
WHERE awaiting_review_since IS NOT NULL AND abandoned_at IS NULL
ORDER BY awaiting_review_since, id
LIMIT %(sample)s

-- name: check_awaiting_reply
-- Documents knocked for and waiting on the person (state 'awaiting_reply'), oldest first.
SELECT id, person_id, kind, knock_sent_at,
       extract(epoch FROM now() - awaiting_reply_since)::float8 AS age_seconds,
       count(*) OVER () AS total
FROM documents
WHERE awaiting_reply_since IS NOT NULL AND delivered_at IS NULL AND abandoned_at IS NULL
  AND status = 'succeeded'
ORDER BY awaiting_reply_since, id
LIMIT %(sample)s

-- name: check_knock_health
-- Knocks of the last %(period)s: how many the platform reports delivered (or failed) once %(settle)s old, and how many were answered (the person wrote after) once %(answer_grace)s old; knocks taken as dropped at their time to live in that period (expired), and those past their deadline by %(overdue)s that nothing has ended yet (overdue: the sweep and the heartbeat, their owners, are not running).
WITH knocked AS (
    SELECT d.id, d.knock_sent_at,
           d.knock_sent_at <= now() - %(settle)s AS settled,
           d.knock_sent_at <= now() - %(answer_grace)s AS answerable,
           knock_delivered(d) AS delivered,
           EXISTS (SELECT 1 FROM status_events s
                   WHERE s.wa_message_id = d.knock_message_id AND s.status = 'failed') AS failed,
           knock_answered(d) AS answered
    FROM documents d
    WHERE d.knock_sent_at > now() - %(period)s
)
SELECT count(*) AS knocked,
       count(*) FILTER (WHERE settled) AS settled,
       count(*) FILTER (WHERE settled AND (failed OR NOT delivered)) AS not_delivered,
       count(*) FILTER (WHERE failed) AS failed,
       count(*) FILTER (WHERE answerable) AS answerable,
       count(*) FILTER (WHERE answerable AND NOT answered) AS unanswered,
       coalesce((array_agg(id ORDER BY knock_sent_at, id)
                 FILTER (WHERE settled AND (failed OR NOT delivered)))[1:%(sample)s], '{}')
           AS not_delivered_ids,
       (SELECT count(*) FROM knocks k WHERE k.expired_at > now() - %(period)s) AS expired,
       (SELECT count(*) FROM knocks k
        WHERE k.expires_at IS NOT NULL AND k.delivered_at IS NULL AND k.read_at IS NULL
          AND k.failed_at IS NULL AND k.expired_at IS NULL
          AND k.expires_at < now() - %(overdue)s) AS overdue
FROM knocked

-- name: check_abandoned_recent
-- Documents abandoned, or whose generation failed, in the last %(period)s, by reason: count, oldest age, the oldest ids.
WITH recent AS (
    SELECT id, abandon_reason AS reason, abandoned_at AS at
    FROM documents WHERE abandoned_at > now() - %(period)s
    UNION ALL
    SELECT id, 'generation_failed', generation_failed_at
    FROM documents WHERE status = 'failed' AND generation_failed_at > now() - %(period)s
)
SELECT reason, count(*) AS count,
       extract(epoch FROM now() - min(at))::float8 AS oldest_age_seconds,
       (array_agg(id ORDER BY at, id))[1:%(sample)s] AS oldest_ids
FROM recent
GROUP BY reason
ORDER BY reason

-- name: check_tier_usage
-- People reached outside the window (knocked: a template) in the rolling last 24 h, those who leave it first first: each person's last knock is their only one within 24 h.
SELECT id AS person_id,
       extract(epoch FROM now() - last_knock_at)::float8 AS age_seconds,
       count(*) OVER () AS total
FROM people
WHERE last_knock_at > now() - interval '24 hours'
ORDER BY last_knock_at, id
LIMIT %(sample)s

-- name: check_sender_paused
-- Is sending paused by a global error for every number, since when, and how many documents wait behind it? And which numbers are paused on their own (sql/migrations/027; each is the engine's own alert, number_paused:<id>).
SELECT s.paused_at, s.pause_code, s.pause_reason,
       extract(epoch FROM now() - s.paused_at)::float8 AS age_seconds,
       (SELECT count(*) FROM documents d
        WHERE d.status = 'succeeded' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
          AND d.awaiting_reply_since IS NULL AND d.awaiting_review_since IS NULL) AS waiting,
       coalesce((SELECT array_agg(id) FROM (
            SELECT d.id FROM documents d
            WHERE d.status = 'succeeded' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
              AND d.awaiting_reply_since IS NULL AND d.awaiting_review_since IS NULL
            ORDER BY d.next_attempt_at, d.id LIMIT %(sample)s) oldest), '{}') AS waiting_ids,
       coalesce((SELECT array_agg(n.phone_number_id ORDER BY n.phone_number_id)
                 FROM sender_state n
                 WHERE n.paused_at IS NOT NULL AND n.phone_number_id <> '*'), '{}')
           AS paused_numbers
FROM sender_state s
WHERE s.phone_number_id = '*'

-- ─────────────────────────── the ops outbox ──────────────────────────────

-- name: alerts_to_send
-- Alerts for %(channel)s that it has not taken yet and not older than %(max_age)s, oldest first (an alert stuck for a day is left recorded, unsent).
SELECT id, dedup_key, severity, kind, message, details, created_at, send_attempts, channel
FROM ops_alerts
WHERE sent_at IS NULL AND channel = %(channel)s AND created_at > now() - %(max_age)s
ORDER BY created_at, id
LIMIT %(limit)s

-- name: alert_poster_lease
-- One poster at a time (the alert sensor, the webhook service's watchdog): %(token)s takes the lease for %(lease)s when it is free or lapsed, or renews its own; false when another holds it. A row, not a session lock: safe behind a transaction pooler (sql/migrations/043).
WITH taken AS (
    UPDATE ops_alert_poster
    SET holder = %(token)s, leased_until = now() + %(lease)s
    WHERE holder IS NULL OR holder = %(token)s OR leased_until <= now()
    RETURNING 1
)
SELECT EXISTS (SELECT 1 FROM taken) AS leased

-- name: alert_poster_release
-- %(token)s gives the poster's lease back (nothing when it lapsed and another took it).
UPDATE ops_alert_poster
SET holder = NULL, leased_until = '-infinity'
WHERE holder = %(token)s

-- name: check_delivery_events
-- Deliveries not yet on Dagster's delivered_documents timeline (the outbox, sql/migrations/008), oldest first, with the totals past %(warn)s and %(error)s; ids are the documents'.
SELECT document_id AS id, event, source, claimed_by,
       extract(epoch FROM now() - occurred_at)::float8 AS age_seconds,
       count(*) OVER () AS total,
       count(*) FILTER (WHERE occurred_at <= now() - %(warn)s) OVER () AS over_warn,
       count(*) FILTER (WHERE occurred_at <= now() - %(error)s) OVER () AS over_error
FROM delivery_events
WHERE reported_at IS NULL
ORDER BY delivery_events.id
LIMIT %(sample)s
