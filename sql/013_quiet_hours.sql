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
