-- Every query the project runs, by name. Parameters are named (%(name)s).
-- The claim, the fence and the knock reservation are here, in one place, so a
-- reviewer can check the races without reading Python.

-- ───────────────────────── server and migrations ─────────────────────────

-- name: database_exists
-- Is there a database of this name on the server?
SELECT 1 FROM pg_database WHERE datname = %(name)s

-- name: migrations_lock
-- Serialise migration runs across processes: held until this transaction ends (no session lock, so a transaction pooler cannot strand it).
SELECT pg_advisory_xact_lock(72430001)

-- name: migrations_table
-- The record of applied migrations.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)

-- name: migrations_applied
-- Versions already applied.
SELECT version FROM schema_migrations ORDER BY version

-- name: migrations_record
-- Record one applied migration.
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s)

-- ───────────────────────────── people ────────────────────────────────────

-- name: insert_person
-- Add a person, bound to business number %(phone_number_id)s (NULL: the default); returns the row.
INSERT INTO people (phone, name, locale, time_zone, brief_opt_in, brief_local_time,
                    phone_number_id)
VALUES (%(phone)s, %(name)s, %(locale)s, %(time_zone)s, %(brief_opt_in)s, %(brief_local_time)s,
        %(phone_number_id)s)
RETURNING *

-- name: set_quiet_hours
-- The person's own quiet hours (local 'HH:MM-HH:MM'; NULL: the default). What
-- the old ones held is due now, and the claim holds it again if the new ones say
-- so; what the person snoozed with Later (the same instant in knock_replies) stays.
WITH released AS (
    UPDATE documents d SET quiet_until = NULL, next_attempt_at = now()
    WHERE d.person_id = %(person_id)s AND d.quiet_until > now()
      AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
      AND NOT EXISTS (SELECT 1 FROM knock_replies kr
                      WHERE kr.person_id = d.person_id AND kr.snoozed_until = d.quiet_until)
    RETURNING d.id
)
UPDATE people SET quiet_hours = %(quiet_hours)s WHERE id = %(person_id)s RETURNING *

-- name: person_by_id
-- One person.
SELECT * FROM people WHERE id = %(id)s

-- name: person_by_phone
-- One person by E.164 number.
SELECT * FROM people WHERE phone = %(phone)s

-- name: list_people
-- Everybody, oldest first.
SELECT * FROM people ORDER BY id

-- name: time_zone_is_valid
-- Is this an IANA time zone name (sql/migrations/016: not a POSIX string, not an abbreviation)?
SELECT is_valid_time_zone(%(time_zone)s) AS valid

-- ──────────────────────────── documents ──────────────────────────────────

-- name: insert_ready_document
-- A document generated elsewhere: ready for delivery, or awaiting review when %(needs_review)s (its kind is in DELIVERY_REVIEW_KINDS).
INSERT INTO documents (person_id, kind, for_date, status, body, generated_at,
                       awaiting_review_since)
VALUES (%(person_id)s, %(kind)s, %(for_date)s, 'succeeded', %(body)s, now(),
        CASE WHEN %(needs_review)s THEN now() END)
RETURNING *

-- name: insert_pending_document
-- A document to be generated; a brief that already exists for that day is not duplicated.
INSERT INTO documents (person_id, kind, for_date)
VALUES (%(person_id)s, %(kind)s, %(for_date)s)
ON CONFLICT (person_id, for_date) WHERE kind = 'daily_brief' DO NOTHING
RETURNING *

-- name: document_by_id
-- One document.
SELECT * FROM documents WHERE id = %(id)s

-- name: document_chunks
-- A document's chunk ledger, in order (without the chunk texts).
SELECT document_id, chunk_index, state, callback_data, wa_message_id, send_attempts, started_at,
       sent_at, unknown_since, delivered_at, read_at, failed_at, error_code
FROM delivery_chunks WHERE document_id = %(document_id)s ORDER BY chunk_index

-- name: state_summary
-- Count and oldest age (seconds) per state; abandoned split by reason.
SELECT state,
       coalesce(abandon_reason, '') AS reason,
       count(*) AS count,
       extract(epoch FROM now() - min(since))::float8 AS oldest_age_seconds
FROM document_states
GROUP BY state, coalesce(abandon_reason, '')
ORDER BY state, reason

-- name: oldest_waiting
-- The oldest document of each state that waits on someone (pending, generating,
-- undelivered, awaiting_reply): its id, last error and next attempt. Found
-- through the partial indexes of those states, so the cost does not grow with
-- the documents ever delivered or abandoned; the state comes from the view.
WITH waiting AS (
    SELECT id FROM documents WHERE in_queue
    UNION ALL
    SELECT id FROM documents
    WHERE awaiting_reply_since IS NOT NULL AND delivered_at IS NULL AND abandoned_at IS NULL
    UNION ALL
    SELECT id FROM documents WHERE status IN ('pending', 'generating') AND abandoned_at IS NULL
)
SELECT DISTINCT ON (s.state)
       s.state, d.id AS oldest_id,
       CASE WHEN s.state IN ('pending', 'generating') THEN d.generation_error
            ELSE d.last_delivery_error END AS oldest_last_error,
       n.at AS oldest_next_attempt_at,
       extract(epoch FROM n.at - now())::float8 AS oldest_next_attempt_in_seconds
FROM waiting w
JOIN document_states s ON s.id = w.id
JOIN documents d ON d.id = w.id
CROSS JOIN LATERAL (
    SELECT CASE WHEN s.state IN ('pending', 'generating') THEN d.next_generation_at
                WHEN s.state IN ('undelivered', 'quiet_hours') THEN d.next_attempt_at END AS at
) n
ORDER BY s.state, s.since, s.id

-- ───────────────────────── eligibility and claim ─────────────────────────

-- name: anything_due
-- The guard's first question, whose plan is one probe of the queue index and
-- costs nothing to make: is any queued document due at all (claimed or not)?
-- No: nothing is eligible, and the guard (a plan that costs a few tenths of a
-- millisecond whenever Postgres chooses to make it again) is not asked.
SELECT EXISTS (SELECT 1 FROM documents WHERE in_queue AND next_attempt_at <= now()) AS due

-- name: guard_exists
-- The heartbeat guard: would a sweep act on anything now? One indexed probe.
-- While sending is paused (every number, or the document's: sql/migrations/027), only
-- once the next probe is due (sql/migrations/018); the document's number (%(default_number)s
-- for a person bound to none) is looked up only while some pause waits on a probe.
SELECT EXISTS (
    SELECT 1 FROM eligible_documents(%(lease)s, %(service_window)s, %(quiet_hours)s) e
    WHERE NOT EXISTS (
        SELECT 1 FROM sender_state s
        WHERE s.paused_at IS NOT NULL AND s.next_probe_at > now()
          AND (s.phone_number_id = '*' OR s.phone_number_id = (SELECT coalesce(d.phone_number_id, p.phone_number_id, %(default_number)s)
                       FROM documents d JOIN people p ON p.id = d.person_id WHERE d.id = e.id)))
) AS eligible

-- name: eligible_ids
-- What a sweep would act on now, and how (tests compare it with the guard).
SELECT id, action, quiet_until
FROM eligible_documents(%(lease)s, %(service_window)s, %(quiet_hours)s) ORDER BY id

-- name: claim_batch
-- Claim up to %(limit)s eligible documents (optionally one document or one
-- person's) and return what delivering each needs, so no second read follows.
-- The queue is read in due order (the documents_queue index) and the reading
-- stops once the batch is full, whatever the queue's depth (sql/migrations/032).
-- Candidates are read eight times over so that concurrent sweepers, which all
-- see the same oldest rows, skip each other's locks and still fill their
-- batch; the outer UPDATE re-checks the claim on the newest row version, so a
-- row claimed meanwhile is not taken. The body comes back only while the
-- ledger holds no chunk text (the first claim: the engine cuts it once).
-- The document's number is the one its first claim wrote, else its person's,
-- else %(default_number)s; the claim writes it, so a document never changes number.
-- %(number)s (`sweep --number`): only that number's documents (the default's
-- takes those of the people bound to none). Not given, the test is a NULL
-- parameter, decided before the number's lookup (docs/design/numbers.md).
WITH candidates AS (
    SELECT e.id, e.action, e.next_attempt_at, e.quiet_until
    FROM eligible_documents(%(lease)s, %(service_window)s, %(quiet_hours)s) e
    WHERE (%(document_id)s::bigint IS NULL OR e.id = %(document_id)s::bigint)
      AND (%(person_id)s::bigint IS NULL OR e.person_id = %(person_id)s::bigint)
      -- Nothing of a paused number (or of any, while every number is paused), but
      -- the probe's one document: %(probe_number)s names the pause it probes
      -- (sql/migrations/018, sql/migrations/027). The number is looked up only while a pause exists:
      -- the first test is uncorrelated, run once per claim. Written as one
      -- correlated NOT EXISTS, the planner made it an anti join it expected to
      -- keep one row of, and read every person again for each due document.
      AND (NOT EXISTS (SELECT 1 FROM sender_state s
                       WHERE s.paused_at IS NOT NULL
                         AND s.phone_number_id IS DISTINCT FROM %(probe_number)s::text)
           OR NOT EXISTS (
          SELECT 1 FROM sender_state s
          WHERE s.paused_at IS NOT NULL
            AND s.phone_number_id IS DISTINCT FROM %(probe_number)s::text
            AND (s.phone_number_id = '*' OR s.phone_number_id = (SELECT coalesce(d.phone_number_id, p.phone_number_id, %(default_number)s)
                       FROM documents d JOIN people p ON p.id = d.person_id WHERE d.id = e.id))))
      AND (%(probe_number)s::text IS NULL OR %(probe_number)s::text = '*'
           OR %(probe_number)s::text = (SELECT coalesce(d.phone_number_id, p.phone_number_id, %(default_number)s)
                       FROM documents d JOIN people p ON p.id = d.person_id WHERE d.id = e.id))
      AND (%(number)s::text IS NULL
           OR %(number)s::text = (SELECT coalesce(d.phone_number_id, p.phone_number_id, %(default_number)s)
                       FROM documents d JOIN people p ON p.id = d.person_id WHERE d.id = e.id))
    ORDER BY e.next_attempt_at, e.id
    LIMIT %(limit)s * 8
),
locked AS (
    SELECT d.id, c.action, c.quiet_until
    FROM documents d JOIN candidates c ON c.id = d.id
    ORDER BY c.next_attempt_at, c.id
    LIMIT %(limit)s
    FOR UPDATE OF d SKIP LOCKED
)
UPDATE documents d
SET claim_token = %(token)s, claimed_at = now(),
    chunk_limit = coalesce(d.chunk_limit, %(chunk_limit)s),
    phone_number_id = coalesce(d.phone_number_id, p.phone_number_id, %(default_number)s)
FROM locked, people p
WHERE d.id = locked.id AND p.id = d.person_id
  AND d.status = 'succeeded' AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
  AND d.awaiting_reply_since IS NULL
  AND (d.claim_token IS NULL OR d.claimed_at < now() - %(lease)s)
RETURNING d.id AS document_id, locked.action, locked.quiet_until, d.chunk_limit,
          d.delivery_attempts, d.knock_sent_at,
          p.id AS person_id, p.phone, p.user_id, p.name, p.locale,
          CASE WHEN locked.action = 'deliver' AND NOT EXISTS (
                   SELECT 1 FROM delivery_chunks c WHERE c.document_id = d.id AND c.body IS NOT NULL)
               THEN delivery_body(d) END AS body,
          d.claim_token AS token,
          d.kind, p.knocks_stopped_at IS NOT NULL AS knocks_stopped,
          d.remind_at IS NOT NULL AND d.reminded_at IS NULL AS remind,
          d.phone_number_id,
          -- The form its ledger holds (sql/migrations/039), and whether it has one: a
          -- document whose delivery began goes on the way it began.
          d.way, EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.document_id = d.id) AS has_ledger,
          p.outside_window

-- name: begin_delivery
-- Start or resume delivering claimed documents, several in one statement (the
-- ledger writer gathers what its sender's documents ask for at once; one
-- document is a batch of one). For each of %(documents)s (document_id, token,
-- phone_number_id, fresh) whose claim holds and none of whose person's other
-- documents is under a live claim: when it is fresh (the first claim), store
-- each of its %(chunks)s (document_id, chunk_index, body, tag) as 'pending'
-- with its text and the tag of its first attempt, chunk 0 already fenced as
-- 'sending' unless sending from its number is paused but for a probe of
-- another document (a ledger from before the text was kept only gets its text
-- filled in); then return each document's ledger in order.
-- A document with no row back: its claim is lost. person_busy: another of the
-- person's documents is under a live claim; give this one back, it waits its turn.
WITH req AS (
    SELECT * FROM jsonb_to_recordset(%(documents)s::jsonb)
        AS r(document_id bigint, token uuid, phone_number_id text, fresh boolean)
),
doc AS (
    SELECT d.id, r.fresh, r.phone_number_id,
           EXISTS (SELECT 1 FROM documents o
                   WHERE o.person_id = d.person_id AND o.in_queue AND o.id <> d.id
                     AND o.claim_token IS NOT NULL AND o.claimed_at >= now() - %(lease)s)
               AS person_busy
    FROM req r JOIN documents d ON d.id = r.document_id AND d.claim_token = r.token
    -- In id order, as every statement that locks several documents does.
    ORDER BY d.id
    -- An operator's cancel locks the row FOR UPDATE and counts the ledger: this
    -- lock (the weakest, which nothing else on the hot path waits for) makes
    -- the fence either wait for the cancel and find the claim revoked, or be
    -- counted by it.
    FOR KEY SHARE OF d
),
gate AS (
    -- Paused for this document: its number's or every number's (sql/migrations/031).
    SELECT doc.id, g.paused FROM doc CROSS JOIN LATERAL sending_gate(doc.phone_number_id, doc.id) g
),
written AS (
    INSERT INTO delivery_chunks AS c
        (document_id, chunk_index, state, body, callback_data, send_attempts)
    SELECT doc.id, t.chunk_index,
           CASE WHEN t.chunk_index = 0 AND NOT gate.paused THEN 'sending' ELSE 'pending' END,
           t.body, t.tag, CASE WHEN t.chunk_index = 0 AND NOT gate.paused THEN 1 ELSE 0 END
    FROM jsonb_to_recordset(%(chunks)s::jsonb)
             AS t(document_id bigint, chunk_index integer, body text, tag text)
    JOIN doc ON doc.id = t.document_id AND doc.fresh AND NOT doc.person_busy
    JOIN gate ON gate.id = doc.id
    ORDER BY doc.id, t.chunk_index
    ON CONFLICT (document_id, chunk_index) DO UPDATE SET body = coalesce(c.body, excluded.body)
    RETURNING c.document_id, c.chunk_index, c.state, c.send_attempts, c.callback_data, c.body,
              extract(epoch FROM now() - coalesce(c.unknown_since, c.started_at))::float8
                  AS ambiguous_age_seconds,
              c.xmax = 0 AS written_now  -- inserted by this statement, not found there
),
ledger AS (
    SELECT * FROM written
    UNION ALL
    SELECT c.document_id, c.chunk_index, c.state, c.send_attempts, c.callback_data, c.body,
           extract(epoch FROM now() - coalesce(c.unknown_since, c.started_at))::float8,
           false
    FROM doc JOIN delivery_chunks c ON c.document_id = doc.id
    WHERE NOT doc.fresh AND NOT doc.person_busy
)
SELECT doc.id AS document_id, doc.person_busy, l.written_now, l.chunk_index, l.state,
       l.send_attempts, l.callback_data,
       CASE WHEN l.state <> 'sent' AND NOT doc.fresh THEN l.body END AS body,
       l.ambiguous_age_seconds
FROM doc LEFT JOIN ledger l ON l.document_id = doc.id AND NOT doc.person_busy
ORDER BY doc.id, l.chunk_index

-- name: advance_delivery
-- One round trip per chunk, for several documents at once (the ledger
-- writer's batch; one document is a batch of one). For each of %(requests)s:
-- record chunk sent_index as accepted (when given; a status webhook may have
-- settled it first), then, if the claim (token) still holds, either fence
-- chunk next_index or, with finish, mark the document delivered (only if
-- every chunk is 'sent') and release the claim. A document is in a batch at
-- most once, and fences or finishes, not both.
-- The fence records the chunk as 'sending' before it is sent: a 'sent' chunk
-- is never re-fenced, a 'pending' or 'failed' one always may be, an ambiguous
-- one ('sending'/'unknown') only when the caller decided to resend. The lease
-- is renewed once it is older than %(renew_after)s. A claim younger than that
-- cannot have been taken (nobody claims inside the lease), only revoked by an
-- operator, whose cancel the row's lock waits for; an older one is proved on
-- the locked row by the renewal, so a sweeper whose lease lapsed never fences
-- a chunk its successor owns. One row per document: ours = false: the claim
-- is lost, send nothing more (the record stands). paused: sending from the
-- document's number (phone_number_id) is paused for every document but a
-- probe's (sql/migrations/018, sql/migrations/027), nothing is fenced; give the claim back; every:
-- for every number.
WITH req AS (
    SELECT * FROM jsonb_to_recordset(%(requests)s::jsonb)
        AS r(document_id bigint, token uuid, phone_number_id text, sent_index integer,
             sent_callback text, wa_message_id text, next_index integer, next_callback text,
             resend_ambiguous boolean, finish boolean)
),
sent AS (
    -- Also a chunk a status webhook settled under the same tag: one that commits
    -- while this statement runs is 'sending' in its snapshot, and the finish
    -- below would take it for a part not yet accepted.
    UPDATE delivery_chunks c
    SET state = 'sent', wa_message_id = r.wa_message_id, sent_at = coalesce(c.sent_at, now()),
        unknown_since = NULL
    FROM req r
    WHERE c.document_id = r.document_id AND c.chunk_index = r.sent_index
      AND c.callback_data = r.sent_callback AND c.state IN ('sending', 'unknown', 'sent')
    RETURNING c.document_id, c.chunk_index
),
ours AS (
    -- Read from the statement's snapshot: the finish compares this counter.
    SELECT d.id, d.chunk_failures
    FROM req r JOIN documents d ON d.id = r.document_id AND d.claim_token = r.token
),
locked AS (
    -- Locked as in begin_delivery, for an operator's cancel; a locked row is
    -- its newest version, hence apart from ours.
    SELECT d.id, d.claimed_at >= now() - %(renew_after)s AS fresh
    FROM req r JOIN documents d ON d.id = r.document_id AND d.claim_token = r.token
    WHERE r.next_index IS NOT NULL
    ORDER BY d.id
    FOR KEY SHARE OF d
),
renewed AS (
    -- Driven by the locked rows, so that each row is locked before it is
    -- renewed: a row this statement updated already could no longer be locked
    -- by it, and would look like a claim lost. The claim is checked again on
    -- the row being updated, which waits for a takeover and sees it.
    UPDATE documents d SET claimed_at = now()
    FROM locked JOIN req r ON r.document_id = locked.id
    WHERE d.id = locked.id AND NOT locked.fresh
      AND d.claim_token = r.token AND d.claimed_at < now() - %(renew_after)s
    RETURNING d.id
),
held AS (
    SELECT id FROM locked WHERE fresh OR id IN (SELECT id FROM renewed)
),
gate AS (
    -- Paused for this document: its number's or every number's (sql/migrations/031).
    SELECT r.document_id, g.paused, g.every
    FROM req r CROSS JOIN LATERAL sending_gate(r.phone_number_id, r.document_id) g
),
fenced AS (
    UPDATE delivery_chunks c
    SET state = 'sending', callback_data = r.next_callback, send_attempts = c.send_attempts + 1,
        started_at = now(), unknown_since = NULL, failed_at = NULL, error_code = NULL,
        wa_message_id = NULL
    FROM req r JOIN held ON held.id = r.document_id JOIN gate ON gate.document_id = r.document_id
    WHERE c.document_id = r.document_id AND c.chunk_index = r.next_index
      AND NOT gate.paused
      AND (c.state IN ('pending', 'failed')
           OR (c.state IN ('sending', 'unknown') AND r.resend_ambiguous))
    RETURNING c.document_id
),
delivered AS (
    UPDATE documents d
    SET delivered_at = now(), claim_token = NULL, claimed_at = NULL, last_delivery_error = NULL,
        -- The way it went, the knock included (sql/migrations/039).
        way = CASE WHEN d.way = 'file' THEN 'file'
                   WHEN d.knock_sent_at IS NULL THEN coalesce(d.way, 'parts')
                   WHEN d.way = 'file_in_window' THEN 'knock_then_file'
                   ELSE 'knock_then_parts' END
    FROM req r JOIN ours ON ours.id = r.document_id
    WHERE r.finish AND d.id = r.document_id AND d.claim_token = r.token
      -- A failed status being applied to an earlier chunk holds this row and
      -- moves the counter (sql/migrations/028): having waited for it, the update re-checks
      -- this on the row's new version and does not finish.
      AND d.chunk_failures = ours.chunk_failures
      AND NOT EXISTS (SELECT 1 FROM delivery_chunks c
                      WHERE c.document_id = d.id AND c.state <> 'sent'
                        AND NOT EXISTS (SELECT 1 FROM sent s
                                        WHERE s.document_id = c.document_id
                                          AND s.chunk_index = c.chunk_index))
    RETURNING d.id
)
SELECT r.document_id,
       ours.id IS NOT NULL AND (r.next_index IS NULL OR held.id IS NOT NULL) AS ours,
       fenced.document_id IS NOT NULL AS fenced,
       delivered.id IS NOT NULL AS delivered,
       gate.paused,
       gate.every
FROM req r
JOIN gate ON gate.document_id = r.document_id
LEFT JOIN ours ON ours.id = r.document_id
LEFT JOIN held ON held.id = r.document_id
LEFT JOIN fenced ON fenced.document_id = r.document_id
LEFT JOIN delivered ON delivered.id = r.document_id
ORDER BY r.document_id

-- name: chunk_failed
-- The platform did not accept the chunk.
UPDATE delivery_chunks
SET state = 'failed', failed_at = now(), error_code = %(error_code)s
WHERE document_id = %(document_id)s AND chunk_index = %(chunk_index)s
  AND callback_data = %(callback_data)s AND state = 'sending'

-- name: release_unknown
-- The request left and no answer came: the chunk's outcome is unknown until a
-- status settles it, and the document goes back due after the grace period.
-- One statement, because the status may come first: a chunk a status settled
-- or failed while we held the claim is no longer 'sending', and the document
-- keeps the due time the status left (settled: due now, as resume_documents
-- skipped it while claimed; failed: its consequence's). Returns whether the
-- chunk was left unknown.
WITH chunk AS (
    UPDATE delivery_chunks
    SET state = 'unknown', unknown_since = now()
    WHERE document_id = %(document_id)s AND chunk_index = %(chunk_index)s
      AND callback_data = %(callback_data)s AND state = 'sending'
    RETURNING document_id
)
UPDATE documents d
SET claim_token = NULL, claimed_at = NULL,
    next_attempt_at = CASE WHEN EXISTS (SELECT 1 FROM chunk)
                           THEN now() + make_interval(secs => %(delay_seconds)s)
                           ELSE d.next_attempt_at END,
    last_delivery_error = CASE WHEN EXISTS (SELECT 1 FROM chunk) THEN %(error)s
                               ELSE d.last_delivery_error END
WHERE d.id = %(document_id)s AND d.claim_token = %(token)s
RETURNING EXISTS (SELECT 1 FROM chunk) AS unknown

-- name: release_for_retry
-- Give the document back with a backoff; %(attempt)s is 1 when the failure
-- counts as an attempt, 0 when it does not (throttling, an unsettled send).
UPDATE documents
SET claim_token = NULL, claimed_at = NULL,
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    delivery_attempts = delivery_attempts + %(attempt)s,
    last_delivery_error = %(error)s
WHERE id = %(document_id)s AND claim_token = %(token)s
RETURNING delivery_attempts

-- name: hold_quiet
-- The person's quiet hours: give the document back, due when they end,
-- unless the person wrote since it was claimed (they are in a conversation:
-- due now). The person row is locked (FOR SHARE) as in await_reply, so a
-- message that arrives meanwhile is seen here or, if it commits after this,
-- finds the document held and wakes it.
WITH person AS (
    SELECT p.last_inbound_at
    FROM people p JOIN documents d ON d.person_id = p.id
    WHERE d.id = %(document_id)s
    FOR SHARE OF p
)
UPDATE documents d
SET claim_token = NULL, claimed_at = NULL,
    next_attempt_at = CASE WHEN person.last_inbound_at > d.claimed_at THEN now()
                           ELSE %(until)s END,
    quiet_until = CASE WHEN person.last_inbound_at > d.claimed_at THEN NULL
                       ELSE %(until)s END
FROM person
WHERE d.id = %(document_id)s AND d.claim_token = %(token)s
RETURNING d.quiet_until IS NOT NULL AS held

-- name: release_claim
-- Give the document back untouched (global stop, shutdown).
UPDATE documents SET claim_token = NULL, claimed_at = NULL
WHERE id = %(document_id)s AND claim_token = %(token)s

-- name: abandon_document
-- Stop trying: never sent again, kept for the report and the ops checks.
UPDATE documents
SET abandoned_at = now(), abandon_reason = %(reason)s, last_delivery_error = %(error)s,
    claim_token = NULL, claimed_at = NULL
WHERE id = %(document_id)s AND claim_token = %(token)s
RETURNING id

-- ───────────────────────────────── knock ─────────────────────────────────

-- name: reserve_knock
-- Reserve this person's one knock per 24 h; no row back means they were
-- knocked recently (for this or another document). Returns the previous
-- value so a failed send can give the reservation back.
UPDATE people p
SET last_knock_at = now()
FROM (SELECT id, last_knock_at AS previous FROM people WHERE id = %(person_id)s FOR UPDATE) old
WHERE p.id = old.id
  AND (p.last_knock_at IS NULL OR p.last_knock_at < now() - interval '24 hours')
RETURNING old.previous, p.last_knock_at AS reserved

-- name: unreserve_knock
-- The knock was not sent after all: give the reservation back.
UPDATE people SET last_knock_at = %(previous)s
WHERE id = %(person_id)s AND last_knock_at = %(reserved)s

-- name: await_reply
-- Window closed: release the claim and leave the queue until the person
-- writes, recording the knock if one was sent now. The person row is locked
-- (FOR SHARE) so a reply that arrives meanwhile is seen here or, if it commits
-- after this, finds the document awaiting and puts it back. The knock just
-- sent is locked too: a failed status that reached the service before this
-- (knock_failed) is seen here, failed_knock_id, for the sender to carry out,
-- and one that comes after finds the document waiting.
WITH person AS (
    SELECT p.last_inbound_at, p.window_refused_at
    FROM people p JOIN documents d ON d.person_id = p.id
    WHERE d.id = %(document_id)s
    FOR SHARE OF p
),
knock AS (
    SELECT k.id, k.failed_at
    FROM knocks k JOIN knock_documents kd ON kd.knock_id = k.id
    WHERE kd.document_id = %(document_id)s AND %(knocked)s
    ORDER BY k.id DESC
    LIMIT 1
    FOR SHARE OF k
)
UPDATE documents d
SET claim_token = NULL, claimed_at = NULL,
    knock_sent_at = CASE WHEN %(knocked)s THEN now() ELSE d.knock_sent_at END,
    knock_message_id = CASE WHEN %(knocked)s THEN %(knock_message_id)s ELSE d.knock_message_id END,
    knock_held_since = NULL,
    awaiting_reply_since = CASE
        WHEN person.last_inbound_at > now() - %(service_window)s
             AND person.last_inbound_at >= coalesce(person.window_refused_at, '-infinity')
        THEN NULL ELSE now() END,
    next_attempt_at = now()
FROM person LEFT JOIN knock ON true
WHERE d.id = %(document_id)s AND d.claim_token = %(token)s
RETURNING d.awaiting_reply_since,
          CASE WHEN knock.failed_at IS NOT NULL THEN knock.id END AS failed_knock_id

-- name: refuse_window
-- The platform refused free-form (131047) at %(at)s (a status's time, or now): the
-- window is closed until the person writes at or after that second. Whole
-- seconds, because the platform's message timestamps are whole seconds.
UPDATE people
SET window_refused_at = greatest(coalesce(window_refused_at, '-infinity'),
                                 date_trunc('second', coalesce(%(at)s::timestamptz, now())))
WHERE id = %(person_id)s

-- name: person_opted_out
-- The platform says the person stopped our messages (131050).
UPDATE people SET opted_out_at = coalesce(opted_out_at, now()) WHERE id = %(person_id)s

-- name: raise_last_inbound
-- The person wrote at %(sent_at)s: their window opens (never moved back by an older message).
UPDATE people
SET last_inbound_at = greatest(coalesce(last_inbound_at, '-infinity'), %(sent_at)s)
WHERE id = %(person_id)s
RETURNING last_inbound_at

-- name: wake_awaiting_documents
-- The person wrote: their documents waiting on a reply, held for their quiet
-- hours (they are awake and in a conversation) or holding a knock for a
-- healthy template (their window is open: no knock needed), are due now.
UPDATE documents
SET awaiting_reply_since = NULL, quiet_until = NULL, knock_held_since = NULL,
    next_attempt_at = now()
WHERE person_id = %(person_id)s
  AND (awaiting_reply_since IS NOT NULL OR quiet_until > now() OR knock_held_since IS NOT NULL)
  AND delivered_at IS NULL AND abandoned_at IS NULL
RETURNING id

-- ───────────────────────────── sender state ──────────────────────────────

-- name: sender_row
-- The pause row of %(phone_number_id)s ('*': every number), made the first time it pauses.
INSERT INTO sender_state (phone_number_id) VALUES (%(phone_number_id)s) ON CONFLICT DO NOTHING

-- name: pause_sender
-- A sender-wide error: every sender of %(phone_number_id)s ('*': of every
-- number) stops (claims and fences read the pause; its row exists: sender_row).
-- The first refusal starts the pause with the first probe %(first_seconds)s
-- away; a refused probe (the probe's own document, %(document_id)s) grows the
-- interval (× 2, at most %(max_seconds)s); refusals of sends already in
-- flight when the pause began only count. fresh: this refusal started the pause.
UPDATE sender_state s
SET paused_at = coalesce(s.paused_at, now()), pause_code = %(code)s, pause_reason = %(reason)s,
    resumed_at = NULL, resumed_by = NULL,
    refused_sends = CASE WHEN s.paused_at IS NULL THEN 1 ELSE s.refused_sends + 1 END,
    probes = CASE WHEN s.paused_at IS NULL THEN 0
                  WHEN is_probe THEN s.probes + 1 ELSE s.probes END,
    probe_interval_seconds = CASE
        WHEN s.paused_at IS NULL OR s.probe_interval_seconds IS NULL THEN %(first_seconds)s
        WHEN is_probe THEN least(s.probe_interval_seconds * 2, %(max_seconds)s)
        ELSE s.probe_interval_seconds END,
    next_probe_at = CASE
        WHEN s.paused_at IS NULL OR s.next_probe_at IS NULL
            THEN now() + make_interval(secs => %(first_seconds)s)
        WHEN is_probe
            THEN now() + make_interval(secs => least(s.probe_interval_seconds * 2,
                                                     %(max_seconds)s))
        ELSE s.next_probe_at END,
    probe_token = CASE WHEN is_probe THEN NULL ELSE s.probe_token END,
    probe_document_id = CASE WHEN is_probe THEN NULL ELSE s.probe_document_id END
FROM (SELECT phone_number_id, paused_at IS NULL AS fresh,
             probe_document_id IS NOT NULL AND probe_document_id = %(document_id)s AS is_probe
      FROM sender_state WHERE phone_number_id = %(phone_number_id)s FOR UPDATE) old
WHERE s.phone_number_id = old.phone_number_id
RETURNING old.fresh, s.paused_at, s.next_probe_at, s.probes, s.refused_sends

-- name: resume_sender
-- A send from %(phone_number_id)s that started after the pause succeeded: the
-- pause of that number and of every number ('*') is over for everybody, and
-- every listener sweeps at once (one notification). Returns the pauses ended.
WITH resumed AS (
    UPDATE sender_state
    SET paused_at = NULL, pause_code = NULL, pause_reason = NULL, resumed_at = now(),
        next_probe_at = NULL, probe_interval_seconds = NULL, probe_token = NULL,
        probe_document_id = NULL, probe_started_at = NULL, resumed_by = %(by)s
    WHERE paused_at IS NOT NULL AND paused_at < %(send_started_at)s
      AND phone_number_id IN ('*', %(phone_number_id)s)
    RETURNING phone_number_id
)
SELECT phone_number_id FROM resumed
CROSS JOIN LATERAL (
    SELECT pg_notify('delivery_ready', '0:' || extract(epoch FROM now())::text)
) AS notified

-- name: sender_state
-- Is sending paused, why, since when, and when is the next probe? One row per
-- pause scope ('*': every number; else one number), the paused ones first.
SELECT paused_at, pause_code, pause_reason, resumed_at, next_probe_at, probe_interval_seconds,
       probes, refused_sends, resumed_by,
       extract(epoch FROM next_probe_at - now())::float8 AS next_probe_in_seconds,
       phone_number_id
FROM sender_state
ORDER BY paused_at IS NULL, phone_number_id <> '*', phone_number_id

-- ─────────────────────── the number's shared pacer ───────────────────────

-- name: pacer_row
-- The number's row on the shared send timeline (once per sender).
INSERT INTO send_pacer (phone_number_id) VALUES (%(phone_number_id)s) ON CONFLICT DO NOTHING

-- name: reserve_send_slots
-- Take %(count)s consecutive send slots, %(spacing)s seconds apart, on the
-- number's timeline: from its first free slot or now, whichever is later, on
-- the database's clock (one clock for the fleet). Returns the first slot, and
-- how many seconds from now it is.
UPDATE send_pacer
SET next_slot = greatest(next_slot, clock_timestamp())
                + make_interval(secs => %(count)s * %(spacing)s)
WHERE phone_number_id = %(phone_number_id)s
RETURNING next_slot - make_interval(secs => %(count)s * %(spacing)s) AS first_slot,
          extract(epoch FROM next_slot - clock_timestamp())::float8
          - %(count)s * %(spacing)s AS first_slot_in

-- name: pacer_state
-- The number's send timeline as `status` shows it: how far ahead it is booked,
-- and its last throttle.
SELECT greatest(extract(epoch FROM next_slot - clock_timestamp()), 0)::float8
           AS booked_ahead_seconds,
       extract(epoch FROM clock_timestamp() - throttled_at)::float8 AS throttled_seconds_ago,
       throttles
FROM send_pacer WHERE phone_number_id = %(phone_number_id)s

-- name: throttle_pacer
-- The platform refused a send for throughput (130429): no slot for anybody for
-- %(seconds)s seconds from now.
UPDATE send_pacer
SET next_slot = greatest(next_slot, clock_timestamp() + make_interval(secs => %(seconds)s)),
    throttled_at = clock_timestamp(), throttles = throttles + 1
WHERE phone_number_id = %(phone_number_id)s

-- ──────────────────────────────── alerts ─────────────────────────────────

-- name: alert_lock
-- Serialise alert deduplication for one key within a transaction.
SELECT pg_advisory_xact_lock(hashtext(%(dedup_key)s))

-- name: last_alert
-- The newest alert for a key: its kind, severity and age.
SELECT kind, severity, extract(epoch FROM now() - created_at)::float8 AS age_seconds
FROM ops_alerts WHERE dedup_key = %(dedup_key)s ORDER BY created_at DESC, id DESC LIMIT 1

-- name: episode_state
-- An episode's key as it stands (watch/episodes.py): its newest row (kind, severity, when it was observed, its age), when it was last opened or escalated and last resolved (as observed), and the database's now; no rows yet: only now.
SELECT last.kind, last.severity, last.observed_at,
       extract(epoch FROM now() - last.created_at)::float8 AS age_seconds,
       (SELECT max(a.observed_at) FROM ops_alerts a
        WHERE a.dedup_key = %(dedup_key)s AND a.kind = 'alert') AS opened_at,
       (SELECT max(a.observed_at) FROM ops_alerts a
        WHERE a.dedup_key = %(dedup_key)s AND a.kind = 'resolved') AS resolved_at,
       now() AS now
FROM (SELECT 1) AS one
LEFT JOIN LATERAL (
    SELECT kind, severity, observed_at, created_at FROM ops_alerts
    WHERE dedup_key = %(dedup_key)s ORDER BY created_at DESC, id DESC LIMIT 1
) last ON true

-- name: insert_alert
-- Record an alert for its channel (sent_at stays NULL until the channel took it); %(episode)s: a row of an episode (watch/episodes.py), kept whole while the episode is open (sql/migrations/017); %(observed_at)s: when what it says was seen (NULL: now, sql/migrations/035).
INSERT INTO ops_alerts (dedup_key, severity, kind, message, details, channel, episode,
                        observed_at)
VALUES (%(dedup_key)s, %(severity)s, %(kind)s, %(message)s, %(details)s, %(channel)s,
        %(episode)s, coalesce(%(observed_at)s::timestamptz, now()))
RETURNING *

-- name: alert_sent
-- The ops channel took the alert.
UPDATE ops_alerts SET sent_at = now(), send_attempts = send_attempts + 1, last_send_error = NULL
WHERE id = %(id)s

-- name: alert_send_failed
-- The ops channel did not take it; it is retried on the next tick.
UPDATE ops_alerts SET send_attempts = send_attempts + 1, last_send_error = %(error)s
WHERE id = %(id)s

-- ──────────────────────────── ready notifications ────────────────────────

-- name: listen_ready
-- Receive a notification whenever a document becomes deliverable (sql/migrations/012).
LISTEN delivery_ready

-- name: next_due
-- When the earliest unclaimed document in the queue that is not due yet becomes
-- due (one index probe); while every number is paused, the next probe; while
-- some numbers are, their next probe if it comes first.
SELECT coalesce(
    (SELECT next_probe_at FROM sender_state WHERE paused_at IS NOT NULL AND phone_number_id = '*'),
    least(
        (SELECT min(next_probe_at) FROM sender_state WHERE paused_at IS NOT NULL),
        (SELECT min(next_attempt_at) FROM documents
         WHERE in_queue AND next_attempt_at > now() AND claim_token IS NULL))
) AS next_due
