-- Dagster as the system of record: the delivery-events outbox (sql/migrations/008) and
-- the daemon's heartbeats for the webhook service's dead-man's switch. Who may
-- report which outbox row, and how a row is reported once:
-- delivery_pipeline/watch/delivery_events.py.

-- ─────────────────────────────── the outbox ──────────────────────────────

-- name: outbox_runs
-- The Dagster runs that wrote or hold unreported delivery events (%(run_source)s and %(run_claimant)s are the LIKE patterns of their names): the sensor asks Dagster which are still running.
SELECT DISTINCT CASE WHEN claimed_by LIKE %(run_claimant)s THEN claimed_by ELSE source END AS name
FROM delivery_events
WHERE reported_at IS NULL
  AND (claimed_by LIKE %(run_claimant)s OR (claimed_by IS NULL AND source LIKE %(run_source)s))

-- name: outbox_pending
-- The oldest unreported delivery events the sensor may take: unclaimed ones (except those a running delivery run wrote and will report itself), pushes whose claim is older than %(lease)s, rows of runs that ended, and its own earlier ones.
SELECT id, occurred_at, document_id, person_id, kind, event, reason, chunks, source,
       claimed_by, claimed_at
FROM delivery_events
WHERE reported_at IS NULL
  AND CASE
        WHEN claimed_by IS NULL THEN NOT source = ANY(%(running_sources)s)
        WHEN claimed_by LIKE %(push_claimant)s THEN claimed_at < now() - %(lease)s
        ELSE NOT claimed_by = ANY(%(running_claimants)s)
      END
ORDER BY id
LIMIT %(limit)s

-- name: outbox_claim_source
-- Claim up to %(limit)s unclaimed, unreported events one writer (%(source)s, an application_name) made; rows another reporter is claiming are skipped, and the outer UPDATE re-checks on the newest row version.
WITH free AS (
    SELECT id FROM delivery_events
    WHERE reported_at IS NULL AND claimed_by IS NULL AND source = %(source)s
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED
)
UPDATE delivery_events e
SET claimed_by = %(claimant)s, claimed_at = now()
FROM free
WHERE e.id = free.id AND e.claimed_by IS NULL AND e.reported_at IS NULL
RETURNING e.id, e.occurred_at, e.document_id, e.person_id, e.kind, e.event, e.reason, e.chunks,
          e.source, e.claimed_by, e.claimed_at

-- name: outbox_claim_seen
-- Claim the events a reporter looked at (%(seen)s: [{id, claimed_by}]) only where nobody took them since: each row's holder must still be the one it saw.
UPDATE delivery_events e
SET claimed_by = %(claimant)s, claimed_at = now()
FROM jsonb_to_recordset(%(seen)s) AS seen (id bigint, claimed_by text)
WHERE e.id = seen.id AND e.reported_at IS NULL
  AND e.claimed_by IS NOT DISTINCT FROM seen.claimed_by
RETURNING e.id, e.occurred_at, e.document_id, e.person_id, e.kind, e.event, e.reason, e.chunks,
          e.source, e.claimed_by, e.claimed_at

-- name: outbox_release
-- A reporter definitely did not report these (the webserver refused or was never reached): free them for the sensor now.
UPDATE delivery_events SET claimed_by = NULL, claimed_at = NULL
WHERE id = ANY(%(ids)s) AND claimed_by = %(claimant)s AND reported_at IS NULL

-- name: outbox_reported
-- These events are on the delivered_documents timeline: reported, for good.
UPDATE delivery_events SET reported_at = now()
WHERE id = ANY(%(ids)s) AND reported_at IS NULL

-- name: outbox_forget
-- Delete up to %(limit)s events reported before now() - %(keep)s, oldest first: the delivered_documents timeline holds them, the outbox only buffered them.
DELETE FROM delivery_events
WHERE id IN (
    SELECT id FROM delivery_events
    WHERE reported_at < now() - %(keep)s
    ORDER BY reported_at
    LIMIT %(limit)s
)

-- ───────────────────────────── the heartbeats ────────────────────────────

-- name: beat
-- Dagster's daemon is alive: %(source)s (the heartbeat sensor's tick, a check evaluation) just ran; the database's now (what a check then reads is observed from it).
INSERT INTO dagster_heartbeats (source, seen_at) VALUES (%(source)s, now())
ON CONFLICT (source) DO UPDATE SET seen_at = greatest(dagster_heartbeats.seen_at, excluded.seen_at)
RETURNING now() AS at

-- name: heartbeats
-- When each heartbeat source last beat, newest first, with its age (the dead-man's switch).
SELECT source, seen_at, extract(epoch FROM now() - seen_at)::float8 AS age_seconds
FROM dagster_heartbeats
ORDER BY seen_at DESC
