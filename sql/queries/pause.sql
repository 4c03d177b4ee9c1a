-- The pause (sql/migrations/018, sql/migrations/027, docs/design/pause.md): who may send while a
-- sender-wide error lasts, the one probe at a time per pause, and the
-- operator's resume. A pause is a row of sender_state: '*' for every number
-- (the token, the app, the account), else one business number.

-- name: sender_gate
-- Before a sweep claims: for each pause, whether this sweep takes its probe
-- (paused, the probe is due: the next one is moved an interval on at once, so
-- a prober that dies delays the next probe by one interval, and a second sweep
-- finds it not due). One row per pause row; open: not paused. A sweep of one
-- number (%(number)s) takes no other number's probe: it could not claim a
-- document of theirs to probe with.
WITH taken AS (
    UPDATE sender_state
    SET probe_token = %(token)s, probe_document_id = NULL, probe_started_at = now(),
        next_probe_at = now() + make_interval(
            secs => coalesce(probe_interval_seconds, %(first_seconds)s))
    WHERE paused_at IS NOT NULL AND coalesce(next_probe_at, '-infinity') <= now()
      AND (%(number)s::text IS NULL OR phone_number_id IN ('*', %(number)s::text))
    RETURNING phone_number_id
)
SELECT s.phone_number_id, s.paused_at IS NULL AS open,
       s.phone_number_id IN (SELECT phone_number_id FROM taken) AS probe,
       s.pause_code, s.next_probe_at
FROM sender_state s
ORDER BY s.phone_number_id <> '*', s.phone_number_id

-- name: probe_document
-- The probing sweep claimed %(document_id)s: it alone may be fenced while %(phone_number_id)s is paused.
UPDATE sender_state SET probe_document_id = %(document_id)s
WHERE probe_token = %(token)s AND paused_at IS NOT NULL AND phone_number_id = %(phone_number_id)s
RETURNING probe_document_id

-- name: end_probe
-- The probe of %(phone_number_id)s ended without a send (a refused or accepted
-- one already ended it): with %(again)s its document went without one (held,
-- abandoned, knocked before), which proved nothing, so the next probe is due
-- now; else nothing was eligible, and the next probe stays an interval away.
UPDATE sender_state
SET probe_token = NULL, probe_document_id = NULL,
    next_probe_at = CASE WHEN %(again)s THEN now() ELSE next_probe_at END
WHERE probe_token = %(token)s AND paused_at IS NOT NULL AND phone_number_id = %(phone_number_id)s
RETURNING next_probe_at

-- name: may_send
-- May %(document_id)s be sent now from %(phone_number_id)s (before a knock, which has no fence)? every: what stops it is the pause of every number.
SELECT NOT paused AS allowed, every FROM sending_gate(%(phone_number_id)s, %(document_id)s)

-- name: resume_sending
-- An operator fixed the cause (`delivery-pipeline resume`): the pause of
-- %(phone_number_id)s (NULL: every pause) is over for everybody, at once, and
-- every listener sweeps (one notification).
WITH resumed AS (
    UPDATE sender_state
    SET paused_at = NULL, pause_code = NULL, pause_reason = NULL, resumed_at = now(),
        next_probe_at = NULL, probe_interval_seconds = NULL, probe_token = NULL,
        probe_document_id = NULL, probe_started_at = NULL, resumed_by = %(by)s
    FROM (SELECT phone_number_id, paused_at, pause_code, pause_reason FROM sender_state
          WHERE paused_at IS NOT NULL
            AND (%(phone_number_id)s::text IS NULL OR phone_number_id = %(phone_number_id)s)
          FOR UPDATE) old
    WHERE sender_state.phone_number_id = old.phone_number_id
    RETURNING old.phone_number_id, old.paused_at, old.pause_code, old.pause_reason
)
SELECT phone_number_id, paused_at, pause_code, pause_reason FROM resumed
CROSS JOIN LATERAL (
    SELECT pg_notify('delivery_ready', '0:' || extract(epoch FROM now())::text)
) AS notified

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
