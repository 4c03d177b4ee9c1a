-- 007: delivery that holds across a fleet of senders.
--
-- 1. One sender per person: eligibility (restated below, superseding 006)
--    offers only a person's oldest document in the queue, and none while
--    another of theirs is under a live claim.
-- 2. The chunk text in the ledger: the body is cut once, at the first claim,
--    into one 'pending' row per chunk; a resumed delivery reads the rows.
-- 3. One pacer per business number: a shared timeline of send slots.

-- ── 1. one sender per person ───────────────────────────────────────────

-- A person's documents in the queue, oldest first: the probe behind "is this
-- the person's oldest?" and "is another of theirs being sent?". Only queued
-- rows are in it, so a probe costs the same however much was ever delivered.
CREATE INDEX documents_queue_by_person ON documents (person_id, generated_at, id) WHERE in_queue;

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
      -- Its person's turn: no older document of theirs waits in the queue
      -- (generated first, then id), and no other of theirs is being sent.
      AND NOT EXISTS (
          SELECT 1 FROM documents o
          WHERE o.person_id = d.person_id AND o.in_queue AND o.id <> d.id
            AND ((o.generated_at, o.id) < (d.generated_at, d.id)
                 OR (o.claim_token IS NOT NULL AND o.claimed_at >= now() - lease))
      )
$$;

-- ── 2. the chunk text in the ledger ────────────────────────────────────

-- 'pending': cut and stored, never fenced; it already carries the tag of its
-- first attempt, so fencing it changes no indexed column (a HOT update).
ALTER TABLE delivery_chunks ADD COLUMN body text;
ALTER TABLE delivery_chunks DROP CONSTRAINT delivery_chunks_state_check;
ALTER TABLE delivery_chunks ADD CONSTRAINT delivery_chunks_state_check
    CHECK (state IN ('pending', 'sending', 'sent', 'failed', 'unknown'));
-- Every row is updated two or three times (fenced, sent, delivered/read): room
-- on its page keeps those updates on the page.
ALTER TABLE delivery_chunks SET (fillfactor = 70);
-- A status names its chunk by the tag's document and chunk (the primary key);
-- an index on the tag itself only cost every send an index entry.
DROP INDEX delivery_chunks_callback;

-- ── 3. one pacer per business number ───────────────────────────────────

-- The first free send slot on the number's shared timeline. A sender takes a
-- few consecutive slots, spaced for the number's limit, in one UPDATE on the
-- database clock; so every sender of the fleet shares the one limit, and a
-- sender that dies loses at most the slots it held. A throttling answer
-- pushes the timeline forward: the whole fleet slows.
CREATE TABLE send_pacer (
    phone_number_id text PRIMARY KEY,
    next_slot       timestamptz NOT NULL DEFAULT now(),
    throttled_at    timestamptz,
    throttles       bigint NOT NULL DEFAULT 0
);
