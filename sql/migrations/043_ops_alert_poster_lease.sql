-- 043: one poster of the ops outbox at a time, by a leased row instead of a
-- session advisory lock. The lock was taken in one statement and released in
-- another: behind a transaction pooler (PgBouncer in transaction mode) the two
-- can run on different server sessions, and a lock left on a session the
-- pooler keeps open is never released, so no alert is posted again. A lease
-- lives in a row, whatever session writes it: taken when free or lapsed,
-- renewed before each post, given back after the pass; a poster that dies
-- holds it for one lease at most (queries_checks.sql: alert_poster_*).

CREATE TABLE ops_alert_poster (
    only_row     boolean PRIMARY KEY DEFAULT true CHECK (only_row),
    holder       uuid,
    leased_until timestamptz NOT NULL DEFAULT '-infinity'
);

INSERT INTO ops_alert_poster DEFAULT VALUES;
