-- The fleet-wide pause (sql/018, docs/design.md §7.1): who may send while a
-- sender-wide error lasts, the one probe at a time, and the operator's resume.

-- name: sender_gate
-- Before a sweep claims: open (not paused), or this sweep takes the probe
-- (paused, the probe is due: the next one is moved an interval on at once, so
-- a prober that dies delays the next probe by one interval, and a second sweep
-- finds it not due), or paused (send nothing).
WITH taken AS (
    UPDATE sender_state
    SET probe_token = %(token)s, probe_document_id = NULL, probe_started_at = now(),
        next_probe_at = now() + make_interval(
            secs => coalesce(probe_interval_seconds, %(first_seconds)s))
    WHERE paused_at IS NOT NULL AND coalesce(next_probe_at, '-infinity') <= now()
    RETURNING true
)
SELECT s.paused_at IS NULL AS open, EXISTS (SELECT 1 FROM taken) AS probe,
       s.pause_code, s.next_probe_at
FROM sender_state s

-- name: probe_document
-- The probing sweep claimed %(document_id)s: it alone may be fenced while paused.
UPDATE sender_state SET probe_document_id = %(document_id)s
WHERE probe_token = %(token)s AND paused_at IS NOT NULL
RETURNING probe_document_id

-- name: end_probe
-- The probe ended without a send (a refused or accepted one already ended it):
-- with %(again)s its document went without one (held, abandoned, knocked
-- before), which proved nothing, so the next probe is due now; else nothing
-- was eligible, and the next probe stays an interval away.
UPDATE sender_state
SET probe_token = NULL, probe_document_id = NULL,
    next_probe_at = CASE WHEN %(again)s THEN now() ELSE next_probe_at END
WHERE probe_token = %(token)s AND paused_at IS NOT NULL
RETURNING next_probe_at

-- name: may_send
-- May %(document_id)s be sent now (before a knock, which has no fence)?
SELECT paused_at IS NULL OR probe_document_id = %(document_id)s AS allowed FROM sender_state

-- name: resume_sending
-- An operator fixed the cause (`delivery-pipeline resume`): the pause is over
-- for everybody, at once, and every listener sweeps (one notification).
WITH resumed AS (
    UPDATE sender_state
    SET paused_at = NULL, pause_code = NULL, pause_reason = NULL, resumed_at = now(),
        next_probe_at = NULL, probe_interval_seconds = NULL, probe_token = NULL,
        probe_document_id = NULL, probe_started_at = NULL, resumed_by = %(by)s
    FROM (SELECT paused_at, pause_code, pause_reason FROM sender_state FOR UPDATE) old
    WHERE sender_state.paused_at IS NOT NULL
    RETURNING old.paused_at, old.pause_code, old.pause_reason
)
SELECT paused_at, pause_code, pause_reason FROM resumed
CROSS JOIN LATERAL (
    SELECT pg_notify('delivery_ready', '0:' || extract(epoch FROM now())::text)
) AS notified
