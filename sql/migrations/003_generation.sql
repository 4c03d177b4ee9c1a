-- 003: generation's claim, the daily-brief clock, and the open-briefs index.

-- The one definition of "which local day's brief is due at this instant":
-- the person's local date at `at`, once their local brief time has passed
-- that day; NULL before it. Wall-clock comparison in the person's zone, so a
-- brief time that falls into a DST gap fires at the first instant after the
-- gap, and one in a repeated hour fires at its first occurrence (the unique
-- key keeps the second one out). An SQL function so the planner inlines it.
CREATE FUNCTION brief_due_date(at timestamptz, time_zone text, brief_local_time time)
RETURNS date
LANGUAGE sql STABLE AS $$
    SELECT CASE WHEN (at AT TIME ZONE time_zone)::time >= brief_local_time
                THEN (at AT TIME ZONE time_zone)::date END
$$;

-- Briefs neither delivered nor abandoned: the set the stale abandonment
-- reads (today's and earlier days' open briefs, whatever their state), so it
-- does not scan every delivered brief ever sent.
CREATE INDEX documents_open_briefs ON documents (for_date)
    WHERE kind = 'daily_brief' AND delivered_at IS NULL AND abandoned_at IS NULL;

-- Generation's queue is documents_generation_queue (001), keyed on
-- next_generation_at. A generation claim pushes next_generation_at to the end
-- of its lease, so "due or claim expired" is one range on the index key, and
-- a document that will never be generated (a brief abandoned as stale before
-- it was) gets a far-future next_generation_at (9999-01-01: 'infinity' would
-- not load into a Python datetime) and drops out of every range scan.
