-- 013: quiet hours in the person's own time.
--
-- No knock and no document the person did not just ask for goes out while
-- it is night for them (DELIVERY_QUIET_HOURS, default 21:00-08:00, or their
-- own people.quiet_hours). A document that becomes deliverable then is held
-- until the quiet hours end: its next_attempt_at moves to that instant, so it
-- sits in the queue index beyond the end of the guard's range
-- (next_attempt_at <= now()) and costs the guard nothing, and quiet_until
-- says why it waits (its state is 'quiet_hours', owner: the clock).

-- 'HH:MM-HH:MM' (start-end, local), or NULL for the default.
ALTER TABLE people ADD COLUMN quiet_hours text
    CHECK (quiet_hours ~ '^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$');

ALTER TABLE documents ADD COLUMN quiet_until timestamptz;

-- When the quiet hours that `at` falls in end, as an instant; NULL when `at`
-- is not in quiet hours (or they are empty: start = end). Local wall-clock
-- arithmetic in the person's zone, then back through the zone, so the end is
-- right across DST changes (an end time inside a spring-forward gap becomes
-- the first instant after the gap).
CREATE FUNCTION quiet_until(at timestamptz, time_zone text, quiet_hours text)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    WITH w AS (
        SELECT (at AT TIME ZONE time_zone) AS local_now,
               split_part(quiet_hours, '-', 1)::time AS starts,
               split_part(quiet_hours, '-', 2)::time AS ends
    )
    SELECT CASE
        WHEN quiet_hours IS NULL OR w.starts = w.ends THEN NULL
        WHEN w.starts < w.ends THEN
            CASE WHEN w.local_now::time >= w.starts AND w.local_now::time < w.ends
                 THEN (w.local_now::date + w.ends) AT TIME ZONE time_zone END
        WHEN w.local_now::time >= w.starts THEN
            (w.local_now::date + 1 + w.ends) AT TIME ZONE time_zone
        WHEN w.local_now::time < w.ends THEN
            (w.local_now::date + w.ends) AT TIME ZONE time_zone
    END
    FROM w
$$;

-- The eligibility definition, restated (supersedes 007) with quiet hours; the
-- third argument is the default quiet hours (DELIVERY_QUIET_HOURS; NULL: none).
--   action = 'abandon_unreachable'  no number, or opted out
--            'abandon_stale'        a brief for a day already over for the person
--            'hold_quiet'           their quiet hours: held until they end
--                                   (quiet_until), no knock either
--            'deliver'              window open (and not refused since): send the chunks
--            'knock'                window closed: knock (or wait for the reply)
-- Not held: a person who wrote in the last 15 minutes (they are in a
-- conversation), and a daily brief within an hour after the time they chose.
DROP FUNCTION eligible_documents(interval, interval);
CREATE FUNCTION eligible_documents(lease interval, service_window interval, quiet_default text)
RETURNS TABLE (id bigint, person_id bigint, kind text, next_attempt_at timestamptz,
               action text, quiet_until timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.person_id, d.kind, d.next_attempt_at,
           CASE
               WHEN p.phone IS NULL OR p.opted_out_at IS NOT NULL THEN 'abandon_unreachable'
               WHEN d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE p.time_zone)::date THEN 'abandon_stale'
               WHEN q.until IS NOT NULL THEN 'hold_quiet'
               WHEN p.last_inbound_at > now() - service_window
                    AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity') THEN 'deliver'
               ELSE 'knock'
           END,
           q.until
    FROM documents d
    JOIN people p ON p.id = d.person_id
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN p.last_inbound_at > now() - interval '15 minutes' THEN NULL
            WHEN d.kind = 'daily_brief'
                 AND d.for_date = (now() AT TIME ZONE p.time_zone)::date
                 AND (now() AT TIME ZONE p.time_zone)::time
                     BETWEEN p.brief_local_time AND p.brief_local_time + interval '1 hour'
                 THEN NULL
            ELSE quiet_until(now(), p.time_zone, coalesce(p.quiet_hours, quiet_default))
        END AS until
    ) q
    WHERE d.in_queue
      AND d.next_attempt_at <= now()
      AND (d.claim_token IS NULL OR d.claimed_at < now() - lease)
      -- Its person's turn (007): no older document of theirs waits in the
      -- queue, and no other of theirs is being sent.
      AND NOT EXISTS (
          SELECT 1 FROM documents o
          WHERE o.person_id = d.person_id AND o.in_queue AND o.id <> d.id
            AND ((o.generated_at, o.id) < (d.generated_at, d.id)
                 OR (o.claim_token IS NOT NULL AND o.claimed_at >= now() - lease))
      )
$$;

-- One state per document (restated from 010) with 'quiet_hours', owner: the
-- clock. Held documents are in the queue, due when their quiet hours end.
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
           ELSE coalesce(d.reviewed_at, d.generated_at, d.created_at)
       END AS since
FROM documents d;
