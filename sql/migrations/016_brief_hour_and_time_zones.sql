-- 016: a brief chosen for 23:xx is not held for the night, and a person's time
-- zone is an IANA name, nothing else.

-- ── the brief's own hour ────────────────────────────────────────────────

-- Is `at` within the hour after the person's chosen brief time on the brief's
-- own day (their local wall clock)? Compared as local timestamps, not times of
-- day: a brief at 23:30 is in its hour until 00:30, where a time-of-day
-- comparison wrapped at midnight (23:30 + 1 hour = 00:30 < 23:30) and held
-- every brief chosen between 23:00 and 23:59 for the night, until the morning
-- found it stale. (After midnight the brief's day is over: stale wins anyway.)
CREATE FUNCTION in_brief_hour(at timestamptz, time_zone text, for_date date,
                              brief_local_time time)
RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT (at AT TIME ZONE time_zone)
           BETWEEN for_date + brief_local_time AND for_date + brief_local_time + interval '1 hour'
$$;

-- The eligibility definition, restated (supersedes 013) with in_brief_hour;
-- everything else as in 013.
CREATE OR REPLACE FUNCTION eligible_documents(lease interval, service_window interval,
                                              quiet_default text)
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
                 AND in_brief_hour(now(), p.time_zone, d.for_date, p.brief_local_time)
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

-- ── time zones: IANA names only ─────────────────────────────────────────

-- 002's check asked Postgres to use the zone, and Postgres also takes POSIX
-- strings ('UTC+3' is three hours *behind* UTC there; 'abc+3' and 'UTC+99'
-- pass too) and abbreviations ('PST'). A person's zone must be an IANA name
-- (a zoneinfo key): the names of Postgres' time zone database, without its
-- posix/ and right/ copies and the host's aliases. Reading pg_timezone_names
-- costs ~40 ms (002), so the names are kept in a table, read by primary key; a
-- name Postgres learned later (a tzdata update) is still found in the view.
CREATE TABLE time_zone_names (name text PRIMARY KEY);

CREATE FUNCTION is_iana_key(name text) RETURNS boolean
LANGUAGE sql IMMUTABLE AS $$
    SELECT name !~ '^(posix|right)/' AND name NOT IN ('posixrules', 'localtime')
$$;

INSERT INTO time_zone_names (name)
SELECT name FROM pg_timezone_names WHERE is_iana_key(name);

CREATE OR REPLACE FUNCTION is_valid_time_zone(tz text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (SELECT 1 FROM time_zone_names WHERE name = tz)
        OR (is_iana_key(tz) AND EXISTS (SELECT 1 FROM pg_timezone_names WHERE name = tz))
$$;

-- People whose zone the old check let in. Each gets the IANA zone that gives
-- the local times Postgres has been computing for them: the fixed offset in
-- force now, as Etc/GMT∓N (whose sign is POSIX's too, so 'UTC+3' becomes
-- 'Etc/GMT+3', three hours behind UTC, exactly as before), or UTC when that
-- offset is not a whole hour between −12 and +14. Nobody's brief moves under
-- them; the old value is kept here, and ops is told to set the real zone.
CREATE TABLE people_time_zone_repairs (
    person_id     bigint PRIMARY KEY REFERENCES people (id),
    old_time_zone text NOT NULL,
    new_time_zone text NOT NULL,
    repaired_at   timestamptz NOT NULL DEFAULT now()
);

WITH bad AS (
    SELECT id, time_zone,
           extract(epoch FROM (now() AT TIME ZONE time_zone) - (now() AT TIME ZONE 'UTC'))
               AS offset_seconds
    FROM people
    WHERE NOT is_valid_time_zone(time_zone)
),
repaired AS (
    SELECT id, time_zone AS old_time_zone,
           CASE
               WHEN offset_seconds = 0 THEN 'UTC'
               WHEN offset_seconds % 3600 = 0 AND offset_seconds BETWEEN -12 * 3600 AND 14 * 3600
                   THEN 'Etc/GMT' || CASE WHEN offset_seconds > 0 THEN '-' ELSE '+' END
                        || (abs(offset_seconds) / 3600)::int
               ELSE 'UTC'
           END AS new_time_zone
    FROM bad
),
kept AS (
    INSERT INTO people_time_zone_repairs (person_id, old_time_zone, new_time_zone)
    SELECT id, old_time_zone, new_time_zone FROM repaired
    RETURNING person_id, old_time_zone, new_time_zone
),
moved AS (
    UPDATE people p SET time_zone = k.new_time_zone
    FROM kept k WHERE p.id = k.person_id
    RETURNING p.id
)
INSERT INTO ops_alerts (dedup_key, severity, message, details)
SELECT 'migration:016:time_zones', 'warning',
       count(*) || ' people had a time zone that is not an IANA name (like UTC+3, which '
       || 'Postgres reads as three hours behind UTC). Each now has the zone that keeps the '
       || 'local times they had (a fixed Etc/GMT offset, or UTC); the old values are in '
       || 'people_time_zone_repairs. Set each person''s real zone.',
       jsonb_build_object('people', jsonb_agg(jsonb_build_object(
           'person_id', k.person_id, 'was', k.old_time_zone, 'now', k.new_time_zone)
           ORDER BY k.person_id))
FROM kept k
HAVING count(*) > 0;
