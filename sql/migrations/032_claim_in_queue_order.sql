-- 032: a claim reads the queue in its order and stops at its batch.
--
-- The claim (claim_batch) takes the oldest due documents that their person's
-- turn and the pauses allow. The planner turned the turn rule's
-- NOT EXISTS into an anti join, which has to read every queued document of
-- every person before the first row comes out; the claim then judged and
-- sorted the whole due queue for each batch: 488 ms a claim of 32 with 100,000
-- documents due (the morning the briefs fall due), growing with the queue
-- (docs/benchmarks.md, "One claim, as the queue grows"). Asked per document
-- instead (an index probe of the person's queued documents), the rule lets the claim walk the
-- queue index in due order and stop once its batch is full, at the same cost
-- at every depth. The rule itself is unchanged.
--
-- The person is looked up per document too: the queue index is then the only
-- scan in the plan, whatever the planner guesses of it (the guard, with a
-- hundred thousand documents held for the night, had it read every person
-- once the turn rule stopped being a join). The queue index gains the id, the
-- claim's tie-break, so its order needs no sort either.

DROP INDEX documents_queue;
CREATE INDEX documents_queue ON documents (next_attempt_at, id) WHERE in_queue;

CREATE OR REPLACE FUNCTION eligible_documents(lease interval, service_window interval,
                                              quiet_default text)
RETURNS TABLE (id bigint, person_id bigint, kind text, next_attempt_at timestamptz,
               action text, quiet_until timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.person_id, d.kind, d.next_attempt_at,
           CASE
               WHEN (p.phone IS NULL AND p.user_id IS NULL) OR p.opted_out_at IS NOT NULL
                    THEN 'abandon_unreachable'
               WHEN d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE p.time_zone)::date THEN 'abandon_stale'
               WHEN superseded(d) THEN 'abandon_superseded'
               WHEN q.until IS NOT NULL THEN 'hold_quiet'
               WHEN p.last_inbound_at > now() - service_window
                    AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity') THEN 'deliver'
               ELSE 'knock'
           END,
           q.until
    FROM documents d
    -- The person, looked up per document (OFFSET 0: never joined by reading
    -- every person), like the turn rule below.
    CROSS JOIN LATERAL (
        SELECT * FROM people WHERE people.id = d.person_id OFFSET 0
    ) p
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
      -- Its person's turn (007, 025): no document of theirs before it in the
      -- turn order waits in the queue, and no other of theirs is being sent.
      -- One held for the night and not begun waits for the morning alone: it
      -- does not hold back what may go now (a brief in its hour).
      AND NOT EXISTS (
          SELECT 1 FROM documents o
          WHERE o.person_id = d.person_id AND o.in_queue AND o.id <> d.id
            AND (((delivery_rank(o.id, o.kind), o.generated_at, o.id)
                      < (delivery_rank(d.id, d.kind), d.generated_at, d.id)
                  AND NOT (coalesce(o.quiet_until > now(), false) AND NOT delivery_begun(o.id)))
                 OR (o.claim_token IS NOT NULL AND o.claimed_at >= now() - lease))
          -- Asked per document, never made a join (OFFSET 0), so that a claim
          -- reads the queue in due order and stops at its batch (sql/032).
          OFFSET 0
      )
$$;
