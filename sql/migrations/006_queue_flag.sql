-- 006: the queue predicate as one stored column, and THE eligibility
-- definition restated over it (this supersedes the function in 001).
--
-- Why: the planner multiplies the selectivities of the four queue clauses as
-- if they were independent. With 1M delivered and 100k awaiting-reply
-- documents it expected ~90,000 rows in an index that held none, and
-- planning the guard cost more than running it (0.28 ms per guard against
-- 0.12 ms on an empty table). A single boolean has exact statistics: the
-- estimate is 1 row and the guard costs the same however much is waiting.
ALTER TABLE documents ADD COLUMN in_queue boolean GENERATED ALWAYS AS (
    status = 'succeeded' AND delivered_at IS NULL AND abandoned_at IS NULL
    AND awaiting_reply_since IS NULL
) STORED;

DROP INDEX documents_queue;
CREATE INDEX documents_queue ON documents (next_attempt_at) WHERE in_queue;

-- Which documents a sweep would act on now, and what it would do; the sweep
-- claims from it and the heartbeat guard asks EXISTS on it.
--   action = 'abandon_unreachable'  no number, or opted out
--            'abandon_stale'        a brief for a day already over for the person
--            'deliver'              window open (and not refused since): send the chunks
--            'knock'                window closed: knock (or wait for the reply)
CREATE OR REPLACE FUNCTION eligible_documents(lease interval, service_window interval)
RETURNS TABLE (id bigint, person_id bigint, kind text, next_attempt_at timestamptz, action text)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.person_id, d.kind, d.next_attempt_at,
           CASE
               WHEN p.phone IS NULL OR p.opted_out_at IS NOT NULL THEN 'abandon_unreachable'
               WHEN d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE p.time_zone)::date THEN 'abandon_stale'
               WHEN p.last_inbound_at > now() - service_window
                    AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity') THEN 'deliver'
               ELSE 'knock'
           END
    FROM documents d
    JOIN people p ON p.id = d.person_id
    WHERE d.in_queue
      AND d.next_attempt_at <= now()
      AND (d.claim_token IS NULL OR d.claimed_at < now() - lease)
$$;
