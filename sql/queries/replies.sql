-- A person's reply to a knock, read for what it asks (delivery/reply.py):
-- Send it (as any reply), Later (snooze), Stop (no more knocks or briefs),
-- Start (back in). Each runs inside the inbound message's transaction.

-- name: knock_answered
-- The knock a reply answers: the one named by its context.id (%(context_id)s), else the person's latest that went out.
SELECT id FROM knocks
WHERE person_id = %(person_id)s
  AND (wa_message_id = %(context_id)s
       OR (%(context_id)s::text IS NULL AND state IN ('sent', 'unknown')))
ORDER BY (wa_message_id = %(context_id)s) DESC NULLS LAST, sent_at DESC, id DESC
LIMIT 1

-- name: record_knock_reply
-- Record what a reply asked for, once per inbound message.
INSERT INTO knock_replies (inbound_message_id, person_id, knock_id, action, via, at,
                           snoozed_until, documents)
VALUES (%(inbound_message_id)s, %(person_id)s, %(knock_id)s, %(action)s, %(via)s,
        %(at)s, %(snoozed_until)s, %(documents)s)
ON CONFLICT (inbound_message_id) DO NOTHING

-- name: snooze_documents
-- Later: every document of the person waiting to be delivered and not being sent waits until %(later_seconds)s from now, or (NULL) their next morning; it shows as quiet_hours (owner: the clock), and writing again makes it due at once as any quiet-hours hold. Returns when.
WITH until AS (
    SELECT CASE WHEN %(later_seconds)s::float8 IS NOT NULL
                THEN now() + make_interval(secs => %(later_seconds)s::float8)
                ELSE next_morning(now(), p.time_zone, coalesce(p.quiet_hours, %(quiet_hours)s))
           END AS at
    FROM people p WHERE p.id = %(person_id)s
)
UPDATE documents d
SET awaiting_reply_since = NULL, knock_held_since = NULL,
    quiet_until = until.at, next_attempt_at = until.at,
    remind_at = NULL
FROM until
WHERE d.person_id = %(person_id)s AND d.status = 'succeeded'
  AND d.delivered_at IS NULL AND d.abandoned_at IS NULL AND d.awaiting_review_since IS NULL
  AND d.claim_token IS NULL
RETURNING until.at

-- name: stop_knocks
-- Stop: the person gets no knock and no daily brief from now (until they write Start).
UPDATE people SET knocks_stopped_at = coalesce(knocks_stopped_at, now()) WHERE id = %(person_id)s

-- name: start_knocks
-- Start: knocks and daily briefs for the person again.
UPDATE people SET knocks_stopped_at = NULL WHERE id = %(person_id)s

-- name: abandon_stopped_documents
-- Stop: every document of the person not delivered yet is abandoned `opted_out`, and any claim revoked (a sender in flight stops at its next fence).
UPDATE documents
SET abandoned_at = now(), abandon_reason = 'opted_out',
    last_delivery_error = 'the person pressed Stop',
    claim_token = NULL, claimed_at = NULL,
    generation_claim_token = NULL, generation_claimed_at = NULL
WHERE person_id = %(person_id)s AND delivered_at IS NULL AND abandoned_at IS NULL
  AND status <> 'failed'
RETURNING id

-- ─────────────────────── the reminder, then no_reply ──────────────────────

-- name: wake_for_reminders
-- Documents waiting on a knock the platform reported delivered (or dropped at its time to live: expire_dropped_knocks), not reminded yet, whose person may be knocked again (the one knock per person per 24 h): back in the queue, due now, marked for their one reminder. The claim then applies the rules as to any knock (quiet hours hold it, a brief whose day is over is abandoned stale).
UPDATE documents d
SET awaiting_reply_since = NULL, next_attempt_at = now(), remind_at = now()
FROM people p
WHERE p.id = d.person_id
  AND d.awaiting_reply_since IS NOT NULL AND d.reminded_at IS NULL
  AND d.claim_token IS NULL AND d.abandoned_at IS NULL AND d.delivered_at IS NULL
  AND p.knocks_stopped_at IS NULL AND p.opted_out_at IS NULL
  AND (p.last_knock_at IS NULL OR p.last_knock_at < now() - interval '24 hours')
  AND EXISTS (SELECT 1 FROM knock_documents kd JOIN knocks k ON k.id = kd.knock_id
              WHERE kd.document_id = d.id AND k.failed_at IS NULL
                AND (k.delivered_at IS NOT NULL OR k.read_at IS NOT NULL
                     OR k.expired_at IS NOT NULL))
RETURNING d.id

-- name: abandon_no_reply
-- Documents still waiting %(after_seconds)s after their reminder went: the person was asked twice and did not answer; abandoned `no_reply`.
UPDATE documents d
SET abandoned_at = now(), abandon_reason = 'no_reply', awaiting_reply_since = NULL,
    last_delivery_error = 'knocked and reminded; no reply'
WHERE d.awaiting_reply_since IS NOT NULL AND d.reminded_at IS NOT NULL
  AND d.reminded_at < now() - make_interval(secs => %(after_seconds)s::float8)
  AND d.claim_token IS NULL AND d.abandoned_at IS NULL AND d.delivered_at IS NULL
RETURNING d.id

-- ─────────────────────── the answer to Later and Stop (038) ──────────────────

-- name: owe_acknowledgement
-- The reply %(inbound_message_id)s asked for Later or Stop: it owes the person one short answer, due now and for %(fresh_seconds)s, from the number they wrote to when that is not theirs (%(to_their_number)s false), else from their own. Once per reply.
INSERT INTO acknowledgements (reply_id, phone_number_id, expires_at)
SELECT kr.id, CASE WHEN %(to_their_number)s THEN NULL ELSE i.to_phone_number_id END,
       now() + make_interval(secs => %(fresh_seconds)s::float8)
FROM knock_replies kr
JOIN inbound_messages i ON i.wa_message_id = kr.inbound_message_id
WHERE kr.inbound_message_id = %(inbound_message_id)s
ON CONFLICT (reply_id) DO NOTHING

-- name: claim_acknowledgements
-- The fence of an answer to a press: up to %(limit)s due and still fresh (of one person, or from one number: %(default_number)s also sends for the people bound to none) go due → sending, each taken by one sender; none from a paused number. With what their words and their send need.
WITH taken AS (
    SELECT a.reply_id, kr.person_id,
           coalesce(a.phone_number_id, p.phone_number_id, %(default_number)s) AS number
    FROM acknowledgements a
    JOIN knock_replies kr ON kr.id = a.reply_id
    JOIN people p ON p.id = kr.person_id
    WHERE a.state = 'due' AND a.due_at <= now() AND a.expires_at > now()
      AND (p.phone IS NOT NULL OR p.user_id IS NOT NULL)
      AND (%(person_id)s::bigint IS NULL OR kr.person_id = %(person_id)s::bigint)
      AND (%(number)s::text IS NULL
           OR coalesce(a.phone_number_id, p.phone_number_id, %(default_number)s) = %(number)s::text)
      AND NOT EXISTS (SELECT 1 FROM sender_state s
                      WHERE s.paused_at IS NOT NULL
                        AND s.phone_number_id IN (
                            '*', coalesce(a.phone_number_id, p.phone_number_id, %(default_number)s)))
    ORDER BY a.due_at
    LIMIT %(limit)s
    FOR UPDATE OF a SKIP LOCKED
)
UPDATE acknowledgements a
SET state = 'sending', claimed_at = now(), attempts = a.attempts + 1
FROM taken t
JOIN knock_replies kr ON kr.id = t.reply_id
JOIN people p ON p.id = t.person_id
WHERE a.reply_id = t.reply_id
RETURNING a.reply_id, t.number AS phone_number_id, a.attempts, kr.person_id, kr.action,
          kr.documents, kr.snoozed_until, p.phone, p.user_id, p.locale, p.time_zone

-- name: acknowledgement_sent
-- The answer %(reply_id)s left: 'sent' with its message id, or 'unknown' (no answer came; never sent again).
UPDATE acknowledgements
SET state = %(state)s, wa_message_id = %(wa_message_id)s, sent_at = now()
WHERE reply_id = %(reply_id)s AND state = 'sending'

-- name: acknowledgement_refused
-- The answer %(reply_id)s did not leave: due again %(retry_seconds)s from now (NULL, or no longer fresh by then: never, 'failed'), its attempt given back unless %(counts_attempt)s; the refusal kept. Its attempts so far.
UPDATE acknowledgements
SET state = CASE WHEN %(retry_seconds)s::float8 IS NULL
                   OR now() + make_interval(secs => %(retry_seconds)s::float8) >= expires_at
                 THEN 'failed' ELSE 'due' END,
    due_at = now() + make_interval(secs => coalesce(%(retry_seconds)s::float8, 0)),
    attempts = attempts - CASE WHEN %(counts_attempt)s THEN 0 ELSE 1 END,
    error_code = %(error_code)s, error = %(error)s
WHERE reply_id = %(reply_id)s AND state = 'sending'
RETURNING attempts

-- name: acknowledgement_given_up
-- The answer %(reply_id)s, given back after a try that was its last (``outcomes.at_limit``), is never sent: 'failed'. Whether it was.
UPDATE acknowledgements SET state = 'failed'
WHERE reply_id = %(reply_id)s AND state = 'due'
RETURNING true


-- ─────────────────────── deadlines of template messages (040) ──────────────

-- name: knock_deadline
-- The knock %(knock_id)s left: the platform drops it if it is not delivered within its template's time to live (%(ttl_seconds)s), and says nothing: its deadline.
UPDATE knocks
SET expires_at = sent_at + make_interval(secs => %(ttl_seconds)s::float8)
WHERE id = %(knock_id)s AND state IN ('sent', 'unknown')

-- name: expire_dropped_knocks
-- Knocks past their deadline by %(grace_seconds)s with no delivered, read or failed status: dropped by the platform, which promises no failed status; marked expired. The daily briefs waiting on them end `expired` (never sent again); their other documents go to their one reminder (wake_for_reminders). Returns the briefs it abandoned.
WITH dropped AS (
    UPDATE knocks k SET expired_at = now()
    WHERE k.expires_at IS NOT NULL AND k.delivered_at IS NULL AND k.read_at IS NULL
      AND k.failed_at IS NULL AND k.expired_at IS NULL
      AND k.expires_at < now() - make_interval(secs => %(grace_seconds)s::float8)
    RETURNING k.id
)
UPDATE documents d
SET abandoned_at = now(), abandon_reason = 'expired', awaiting_reply_since = NULL,
    last_delivery_error = 'its knock was dropped by the platform at the template''s time to live'
FROM dropped
JOIN knock_documents kd ON kd.knock_id = dropped.id
WHERE d.id = kd.document_id AND d.kind = 'daily_brief'
  AND d.awaiting_reply_since IS NOT NULL
  AND d.claim_token IS NULL AND d.abandoned_at IS NULL AND d.delivered_at IS NULL
RETURNING d.id

-- name: part_deadline
-- Part %(chunk_index)s of document %(document_id)s, a template message (a file on a document template), left: the platform drops it if it is not delivered within its template's time to live (%(ttl_seconds)s), and says nothing: its deadline.
UPDATE delivery_chunks
SET expires_at = coalesce(sent_at, now()) + make_interval(secs => %(ttl_seconds)s::float8)
WHERE document_id = %(document_id)s AND chunk_index = %(chunk_index)s
  AND state IN ('sent', 'unknown')

-- name: expire_dropped_parts
-- Template messages of documents (a file on a document template) past their deadline by %(grace_seconds)s, and by less than a day more, with no delivered, read or failed status: dropped by the platform; marked expired. A daily brief recorded delivered by one is not: it ends `expired` (never sent again). Returns the briefs it abandoned.
WITH dropped AS (
    UPDATE delivery_chunks c SET expired_at = now()
    WHERE c.expires_at IS NOT NULL AND c.expired_at IS NULL
      AND c.expires_at < now() - make_interval(secs => %(grace_seconds)s::float8)
      AND c.expires_at > now() - make_interval(secs => %(grace_seconds)s::float8)
                               - interval '1 day'
      AND c.delivered_at IS NULL AND c.read_at IS NULL AND c.failed_at IS NULL
    RETURNING c.document_id
)
UPDATE documents d
SET delivered_at = NULL, abandoned_at = now(), abandon_reason = 'expired',
    last_delivery_error = 'its file was dropped by the platform at the template''s time to live'
FROM (SELECT DISTINCT document_id FROM dropped) gone
WHERE d.id = gone.document_id AND d.kind = 'daily_brief' AND d.abandoned_at IS NULL
  AND d.claim_token IS NULL
RETURNING d.id

-- ─────────────────────── a person who writes sees us answer (040) ──────────

-- name: take_read_mark
-- The person's own messages to %(number)s (or to a number not named) from the last %(fresh_seconds)s, not marked read yet: marked now, by this sender alone (one statement, so a fleet marks each once). The newest one's id, which the read mark names (it marks those before it too); none: nothing to mark.
WITH marked AS (
    UPDATE inbound_messages i SET read_marked_at = now()
    WHERE i.person_id = %(person_id)s AND i.read_marked_at IS NULL
      AND i.received_at > now() - make_interval(secs => %(fresh_seconds)s::float8)
      AND (i.to_phone_number_id IS NULL OR i.to_phone_number_id = %(number)s)
      AND i.message_type NOT IN ('system', 'ephemeral', 'unknown')
    RETURNING i.wa_message_id, i.sent_at, i.received_at
)
SELECT wa_message_id FROM marked ORDER BY sent_at DESC, received_at DESC LIMIT 1
