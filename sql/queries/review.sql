-- Review before delivery (sql/migrations/010_review.sql): the reviewers' one rule and
-- what their page lists. Every way to decide (the CLI, the Dagster job, the
-- review page) runs decide_review; nothing else moves a document out of
-- 'awaiting_review' but the stale-brief abandonment (queries/generation.sql).

-- name: decide_review
-- A reviewer's decision, taken only while the document still awaits review: one conditional UPDATE, so of two reviewers acting at once exactly one gets the row back (the other's UPDATE waits for the row, then finds it decided and matches nothing). 'approved': into the delivery queue, due now, with the edited text %(body)s if given (kept beside the generated body). 'rejected': abandoned as 'rejected' with %(reason)s.
UPDATE documents
SET awaiting_review_since = NULL,
    review_decision = %(decision)s, reviewed_by = %(reviewer)s, reviewed_at = now(),
    review_reason = %(reason)s,
    -- an "edit" identical to the generated body is no edit
    approved_body = CASE WHEN %(decision)s = 'approved' THEN nullif(%(body)s, body) END,
    next_attempt_at = now(),
    abandoned_at = CASE WHEN %(decision)s = 'rejected' THEN now() END,
    abandon_reason = CASE WHEN %(decision)s = 'rejected' THEN 'rejected' END,
    last_delivery_error = CASE WHEN %(decision)s = 'rejected'
                               THEN left('rejected in review: ' || %(reason)s, 1000)
                               ELSE last_delivery_error END
WHERE id = %(document_id)s AND awaiting_review_since IS NOT NULL AND abandoned_at IS NULL
RETURNING id, person_id, review_decision, reviewed_by, reviewed_at

-- name: document_review
-- Where one document stands with the reviewers: the decision once taken (by whom, when), else what it waits on instead. Read after a decision matched nothing, to tell the reviewer why.
SELECT id, kind, status, awaiting_review_since, review_decision, reviewed_by, reviewed_at,
       review_reason, approved_body IS NOT NULL AS edited, abandoned_at, abandon_reason,
       delivered_at
FROM documents
WHERE id = %(document_id)s

-- name: awaiting_review
-- Documents awaiting review, oldest first (at most %(limit)s), each with its person and the text that would be delivered, and how many wait in all.
SELECT d.id, d.kind, d.for_date, delivery_body(d) AS body, d.awaiting_review_since,
       extract(epoch FROM now() - d.awaiting_review_since)::float8 AS age_seconds,
       p.id AS person_id, p.name, p.phone, p.locale, p.time_zone,
       p.opted_out_at IS NOT NULL AS opted_out,
       count(*) OVER () AS total
FROM documents d JOIN people p ON p.id = d.person_id
WHERE d.awaiting_review_since IS NOT NULL AND d.abandoned_at IS NULL
ORDER BY d.awaiting_review_since, d.id
LIMIT %(limit)s

-- The review page's sessions and sign-in limits (sql/migrations/015; the rules in
-- service/sessions.py). An attempt is one transaction: lock, state, the token
-- check in Python, then the failure or the session recorded.

-- name: review_sign_in_lock
-- One sign-in attempt at a time across every replica (transaction-level advisory lock): counting the failures, checking the token and recording the outcome are one step, so a burst spread over replicas gets no more guesses than the limits allow.
SELECT pg_advisory_xact_lock(72430003)

-- name: review_sign_in_state
-- Where a sign-in from %(client)s stands: until when the client is held (its %(client_limit)s-th latest failure within %(window)s and since its last sign-in, plus the window), until when clients not known are held (the %(overall_limit)s-th latest failure of all, plus the window), and whether it signed in within %(known_for)s.
SELECT
    (SELECT f.failed_at + %(window)s
     FROM review_sign_in_failures f
     WHERE f.client = %(client)s
       AND f.failed_at > greatest(now() - %(window)s,
                                  coalesce(k.last_signed_in_at, '-infinity'::timestamptz))
     ORDER BY f.failed_at DESC
     OFFSET %(client_limit)s::int - 1 LIMIT 1) AS client_held_until,
    (SELECT f.failed_at + %(window)s
     FROM review_sign_in_failures f
     WHERE f.failed_at > now() - %(window)s
     ORDER BY f.failed_at DESC
     OFFSET %(overall_limit)s::int - 1 LIMIT 1) AS strangers_held_until,
    coalesce(k.last_signed_in_at > now() - %(known_for)s, false) AS known,
    now() AS now
FROM (SELECT 1) AS one
LEFT JOIN review_known_clients k ON k.client = %(client)s

-- name: record_sign_in_failure
-- A wrong token from %(client)s; failures older than %(window)s count no more and are forgotten on the way.
WITH forgotten AS (
    DELETE FROM review_sign_in_failures WHERE failed_at <= now() - %(window)s
)
INSERT INTO review_sign_in_failures (client) VALUES (%(client)s)

-- name: start_review_session
-- A reviewer or an operator (%(operator)s) signed in from %(client)s: their session (the cookie key's hash, name, CSRF token, expiring after %(lifetime)s) and the client remembered as known; expired sessions and clients unseen for %(known_for)s are forgotten on the way.
WITH expired AS (
    DELETE FROM review_sessions WHERE expires_at <= now()
), unseen AS (
    DELETE FROM review_known_clients
    WHERE last_signed_in_at <= now() - %(known_for)s AND client <> %(client)s
), known AS (
    INSERT INTO review_known_clients (client, last_signed_in_at) VALUES (%(client)s, now())
    ON CONFLICT (client) DO UPDATE SET last_signed_in_at = excluded.last_signed_in_at
)
INSERT INTO review_sessions (key_hash, reviewer, operator, csrf, client, expires_at)
VALUES (%(key_hash)s, %(reviewer)s, %(operator)s, %(csrf)s, %(client)s, now() + %(lifetime)s)
RETURNING reviewer, operator, csrf, expires_at

-- name: review_session
-- The live session whose cookie key hashes to %(key_hash)s: none once it expired or its reviewer signed out.
SELECT reviewer, operator, csrf, expires_at
FROM review_sessions
WHERE key_hash = %(key_hash)s AND expires_at > now()

-- name: end_review_session
-- Signing out: the session ends for every replica (a copy of its cookie is refused from now on).
DELETE FROM review_sessions WHERE key_hash = %(key_hash)s
