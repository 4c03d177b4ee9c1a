-- Generation and the daily briefs: the generator's claim (same discipline as
-- delivery's: SKIP LOCKED batch claim with a lease, every write fenced by the
-- claim token), the enqueue of the day's briefs, and the stale abandonment.

-- ─────────────────────────────── generation ──────────────────────────────

-- name: generation_due
-- The generation sensor's guard: is any document due for generation (or its generation claim expired)? One range probe on documents_generation_queue.
SELECT EXISTS (
    SELECT 1 FROM documents
    WHERE status IN ('pending', 'generating') AND abandoned_at IS NULL
      AND next_generation_at <= now()
) AS due

-- name: fail_exhausted_generation
-- Documents whose generation was claimed %(max_attempts)s times and never finished (the worker died each time): failed, for ops.
UPDATE documents
SET status = 'failed', generation_claim_token = NULL, generation_claimed_at = NULL,
    generation_error = left(
        'gave up after ' || generation_attempts || ' attempts'
        || coalesce('; last error: ' || generation_error, '; the generator never finished'), 1000)
WHERE status IN ('pending', 'generating') AND next_generation_at <= now()
  AND generation_attempts >= %(max_attempts)s
  AND abandoned_at IS NULL
RETURNING id

-- name: claim_generation_batch
-- Claim up to %(limit)s documents due for generation (optionally one). A claim pushes next_generation_at to the end of the lease, so an expired claim is simply due again; rows another generator holds are skipped.
WITH candidates AS (
    SELECT d.id
    FROM documents d
    WHERE d.status IN ('pending', 'generating') AND d.next_generation_at <= now()
      AND d.abandoned_at IS NULL
      AND d.generation_attempts < %(max_attempts)s
      AND (%(document_id)s::bigint IS NULL OR d.id = %(document_id)s::bigint)
    ORDER BY d.next_generation_at, d.id
    LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE documents d
SET status = 'generating', generation_claim_token = %(token)s, generation_claimed_at = now(),
    next_generation_at = now() + %(lease)s, generation_attempts = d.generation_attempts + 1
FROM candidates c, people p
WHERE d.id = c.id AND p.id = d.person_id
RETURNING d.id, d.person_id, d.kind, d.for_date, d.generation_attempts,
          p.name, p.locale, p.time_zone, (now() AT TIME ZONE p.time_zone)::date AS local_today

-- name: generation_succeeded
-- Store the body if our generation claim still holds; the document enters the delivery queue, due now, or awaits review when %(needs_review)s (its kind is in DELIVERY_REVIEW_KINDS).
UPDATE documents
SET status = 'succeeded', body = %(body)s, generated_at = now(), generation_error = NULL,
    generation_claim_token = NULL, generation_claimed_at = NULL, next_attempt_at = now(),
    awaiting_review_since = CASE WHEN %(needs_review)s THEN now() END
WHERE id = %(document_id)s AND generation_claim_token = %(token)s AND status = 'generating'
RETURNING id, person_id, abandoned_at, awaiting_review_since

-- name: generation_failed
-- Record a failed generation if our claim still holds: back to pending after %(delay_seconds)s, or failed for good when %(final)s; %(refund)s is 1 when the attempt should not count (the generator was misconfigured, not this document's fault).
UPDATE documents
SET status = CASE WHEN %(final)s THEN 'failed' ELSE 'pending' END,
    generation_error = %(error)s,
    generation_attempts = generation_attempts - %(refund)s,
    generation_claim_token = NULL, generation_claimed_at = NULL,
    next_generation_at = CASE WHEN %(final)s THEN next_generation_at
                              ELSE now() + make_interval(secs => %(delay_seconds)s) END
WHERE id = %(document_id)s AND generation_claim_token = %(token)s AND status = 'generating'
RETURNING status

-- name: pause_generation
-- The generator is misconfigured: every document due for generation waits %(delay_seconds)s instead of failing alike.
UPDATE documents
SET next_generation_at = now() + make_interval(secs => %(delay_seconds)s)
WHERE status = 'pending' AND next_generation_at <= now() AND abandoned_at IS NULL
RETURNING id

-- name: person_local_today
-- The person's local date now (the default for_date of a brief requested by hand).
SELECT (now() AT TIME ZONE time_zone)::date AS local_today FROM people WHERE id = %(person_id)s

-- ────────────────────────────── daily briefs ─────────────────────────────

-- name: brief_due_date
-- The local date whose brief is due at %(at)s for this zone and brief time, or NULL before the brief time (property-tested against zoneinfo).
SELECT brief_due_date(%(at)s, %(time_zone)s, %(brief_local_time)s) AS for_date

-- name: enqueue_daily_briefs
-- One pending brief for each opted-in, reachable person who has not pressed Stop, whose local brief time has passed at %(at)s (NULL: now) and who has none for that local date. The NOT EXISTS spares the sequence; the unique index documents_one_brief_per_day makes it race-safe.
INSERT INTO documents (person_id, kind, for_date)
SELECT p.id, 'daily_brief', due.for_date
FROM people p
CROSS JOIN LATERAL (
    SELECT brief_due_date(coalesce(%(at)s::timestamptz, now()), p.time_zone, p.brief_local_time)
        AS for_date
) due
WHERE p.brief_opt_in AND p.opted_out_at IS NULL AND p.knocks_stopped_at IS NULL
  AND p.phone IS NOT NULL
  AND due.for_date IS NOT NULL
  AND NOT EXISTS (
      SELECT 1 FROM documents d
      WHERE d.person_id = p.id AND d.kind = 'daily_brief' AND d.for_date = due.for_date
  )
ORDER BY p.id
ON CONFLICT (person_id, for_date) WHERE kind = 'daily_brief' DO NOTHING
RETURNING id, person_id, for_date

-- name: abandon_stale_briefs
-- Abandon (stale) every open brief for a day already over in its person's zone at %(at)s (NULL: now), whatever it waits on: generation, delivery, or a knock reply the eligibility view cannot see. A brief under a live delivery claim is left to its sender; a failed generation stays failed for ops.
UPDATE documents d
SET abandoned_at = now(), abandon_reason = 'stale',
    last_delivery_error = 'brief for a day already over',
    claim_token = NULL, claimed_at = NULL
FROM people p
WHERE p.id = d.person_id
  AND d.kind = 'daily_brief' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
  AND d.status <> 'failed'
  AND d.for_date < (coalesce(%(at)s::timestamptz, now()) AT TIME ZONE p.time_zone)::date
  AND (d.claim_token IS NULL OR d.claimed_at < now() - %(lease)s)
RETURNING d.id, d.person_id, d.for_date, d.status
