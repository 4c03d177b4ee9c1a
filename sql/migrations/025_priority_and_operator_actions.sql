-- 025: a person's documents in the order that matters to them, a newer
-- document replacing an older one nobody has started sending, and an
-- operator's cancel and resend, each recorded.
--
-- Until now a person's documents went out strictly oldest first: a plan the
-- person asked for waited behind that morning's brief, and three requests for
-- a plan delivered three plans. The turn is now (begun, asked for, generated,
-- id): a document with a part that may have reached the person is finished
-- before anything else of theirs (never cut in half, also when an older one
-- comes back from awaiting a reply), then plans (asked for), then the rest
-- (daily briefs), each oldest first.

ALTER TABLE documents DROP CONSTRAINT documents_abandon_reason_check;
ALTER TABLE documents ADD CONSTRAINT documents_abandon_reason_check CHECK (abandon_reason IN (
    'stale', 'undeliverable', 'opted_out', 'max_attempts', 'unknown_outcome', 'unreachable',
    'operator', 'rejected',
    'superseded',  -- a newer document of the same kind (and day) for the person, before a part left
    'cancelled'    -- an operator's `documents cancel`
));

-- Has a part of this document been sent, or may it have been (fenced, or an
-- unknown outcome)? A begun document is finished whole before anything else
-- of its person's, and is never superseded.
CREATE FUNCTION delivery_begun(doc bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (SELECT 1 FROM delivery_chunks c
                   WHERE c.document_id = doc AND c.state IN ('sent', 'sending', 'unknown'))
$$;

-- A person's turn order, smallest first: begun, then asked for (a plan), then
-- the rest (a daily brief).
CREATE FUNCTION delivery_rank(doc bigint, kind text) RETURNS integer
    LANGUAGE sql STABLE
    AS $$
    SELECT CASE WHEN delivery_begun(doc) THEN 0 WHEN kind = 'plan' THEN 1 ELSE 2 END
$$;

-- What an operator did to a document (`documents cancel|resend`, the
-- operate_document job, the review page): who, when, why, from which state,
-- how many parts had gone out, and for a resend the ledger as it was (its
-- message ids and receipts), since the ledger starts again.
CREATE TABLE document_actions (
    id          bigserial PRIMARY KEY,
    document_id bigint NOT NULL REFERENCES documents (id),
    action      text NOT NULL CHECK (action IN ('cancel', 'resend')),
    operator    text NOT NULL CHECK (btrim(operator) <> ''),
    reason      text,
    at          timestamptz NOT NULL DEFAULT now(),
    from_state  text NOT NULL,
    parts_sent  integer NOT NULL,
    in_flight   boolean NOT NULL,  -- a sender held the claim (cancel: it stops at its next fence)
    ledger      jsonb
);
CREATE INDEX document_actions_by_document ON document_actions (document_id, id);

-- A resent document is never superseded: the operator sent it on purpose.
CREATE FUNCTION resent(doc bigint) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (SELECT 1 FROM document_actions a WHERE a.document_id = doc AND a.action = 'resend')
$$;

-- Superseded: a newer document of the same kind and day (a plan without a day
-- is replaced by a newer plan without one) for the same person is ready (or
-- delivered), and no part of this one may have reached the person. Decided
-- at the claim, so a sender in flight finishes first (the claim keeps it out
-- of eligibility) and a claim made before the newer one was ready delivers
-- the older whole.
CREATE FUNCTION superseded(d documents) RETURNS boolean
    LANGUAGE sql STABLE
    AS $$
    SELECT EXISTS (
        SELECT 1 FROM documents n
        WHERE n.person_id = d.person_id AND n.kind = d.kind
          AND n.for_date IS NOT DISTINCT FROM d.for_date AND n.id > d.id
          AND n.status = 'succeeded' AND n.abandoned_at IS NULL AND n.awaiting_review_since IS NULL)
       AND NOT delivery_begun(d.id) AND NOT resent(d.id)
$$;

-- The eligibility definition, restated (supersedes 016): the turn order and
-- supersede above, and 022's reach (unreachable only with neither a number
-- nor a BSUID, or opted out).
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
      )
$$;
