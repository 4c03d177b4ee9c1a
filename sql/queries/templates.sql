-- Knocks as watched messages, and the knock templates' lifecycle (sql/migrations/020).
-- A knock is a row of `knocks` linked to its document(s); a template's health
-- is `template_problem` over what the lifecycle webhooks and our own sends
-- said about it.

-- ─────────────────────────────── templates ───────────────────────────────

-- name: template_health
-- Each (%(names)s[i], %(languages)s[i]) in order: its problem ('ok' when healthy or never heard of), whether a knock may still use it, and what the platform said.
SELECT c.name, c.language, c.position::int AS position,
       template_problem(t) AS problem, template_sendable(t) AS sendable,
       t.status, t.quality, t.category, t.announced_category, t.announced_effective_at,
       t.paused_until, t.pause_count, t.refused_code, t.refused_until, t.status_at,
       (t.status = 'PAUSED' AND t.paused_until <= now()) AS pause_lapsed
FROM unnest(%(names)s::text[], %(languages)s::text[]) WITH ORDINALITY AS c (name, language, position)
LEFT JOIN message_templates t ON t.name = c.name AND t.language = c.language
ORDER BY c.position

-- name: note_template_refused
-- A send naming this template was refused with a template-scoped code: knocks avoid it until %(recheck_seconds)s from now (then one send tries it again), unless a lifecycle webhook says it is approved sooner.
INSERT INTO message_templates AS t (name, language, refused_code, refused_at, refused_until)
VALUES (%(name)s, %(language)s, %(code)s, now(),
        now() + make_interval(secs => %(recheck_seconds)s))
ON CONFLICT (name, language) DO UPDATE
SET refused_code = EXCLUDED.refused_code, refused_at = EXCLUDED.refused_at,
    refused_until = EXCLUDED.refused_until, updated_at = now()

-- name: insert_template_event
-- Keep a lifecycle webhook's change once (a redelivery or a duplicate is no row back: nothing to apply).
INSERT INTO template_events (field, name, language, event, occurred_at, payload)
VALUES (%(field)s, %(name)s, %(language)s, %(event)s, %(occurred_at)s, %(payload)s)
ON CONFLICT DO NOTHING
RETURNING name

-- name: template_status_event
-- message_template_status_update: the template's status as of %(occurred_at)s (an older event than the one applied changes nothing). A pause lasts 3 h, a second one 6 h; approval clears a pause and our own refusals.
INSERT INTO message_templates AS t
    (name, language, template_id, status, status_at, status_reason, pause_count, paused_until,
     disable_date)
VALUES (%(name)s, %(language)s, %(template_id)s, %(event)s, %(occurred_at)s, %(reason)s,
        CASE WHEN %(event)s = 'PAUSED' THEN 1 ELSE 0 END,
        CASE WHEN %(event)s = 'PAUSED'
             THEN %(occurred_at)s + CASE WHEN %(pause_title)s::text = 'SECOND_PAUSE'
                                         THEN interval '6 hours' ELSE interval '3 hours' END END,
        %(disable_date)s)
ON CONFLICT (name, language) DO UPDATE
SET template_id = coalesce(EXCLUDED.template_id, t.template_id),
    status = EXCLUDED.status, status_at = EXCLUDED.status_at,
    status_reason = EXCLUDED.status_reason,
    pause_count = t.pause_count + EXCLUDED.pause_count,
    paused_until = CASE
        WHEN EXCLUDED.status <> 'PAUSED' THEN NULL
        WHEN %(pause_title)s::text = 'FIRST_PAUSE' THEN EXCLUDED.status_at + interval '3 hours'
        WHEN %(pause_title)s::text = 'SECOND_PAUSE' OR t.pause_count >= 1
            THEN EXCLUDED.status_at + interval '6 hours'
        ELSE EXCLUDED.status_at + interval '3 hours' END,
    disable_date = CASE WHEN EXCLUDED.status = 'FLAGGED' THEN EXCLUDED.disable_date END,
    refused_code = CASE WHEN EXCLUDED.status IN ('APPROVED', 'REINSTATED') THEN NULL
                        ELSE t.refused_code END,
    refused_until = CASE WHEN EXCLUDED.status IN ('APPROVED', 'REINSTATED') THEN NULL
                         ELSE t.refused_until END,
    updated_at = now()
WHERE t.status_at IS NULL OR t.status_at <= EXCLUDED.status_at

-- name: template_quality_event
-- message_template_quality_update: the template's quality as of %(occurred_at)s (never moved back by an older event).
INSERT INTO message_templates AS t (name, language, template_id, quality, quality_at)
VALUES (%(name)s, %(language)s, %(template_id)s, %(quality)s, %(occurred_at)s)
ON CONFLICT (name, language) DO UPDATE
SET template_id = coalesce(EXCLUDED.template_id, t.template_id),
    quality = EXCLUDED.quality, quality_at = EXCLUDED.quality_at, updated_at = now()
WHERE t.quality_at IS NULL OR t.quality_at <= EXCLUDED.quality_at

-- name: template_category_event
-- template_category_update: an announced re-categorisation (%(announced)s: correct_category, in force from %(effective_at)s) or a completed one (the new category; the announcement it fulfils is cleared).
INSERT INTO message_templates AS t
    (name, language, template_id, category, category_at, announced_category, announced_at,
     announced_effective_at)
VALUES (%(name)s, %(language)s, %(template_id)s,
        CASE WHEN %(announced)s THEN %(previous_category)s::text ELSE %(category)s::text END,
        CASE WHEN %(announced)s THEN NULL ELSE %(occurred_at)s END,
        CASE WHEN %(announced)s THEN %(category)s::text END,
        CASE WHEN %(announced)s THEN %(occurred_at)s END,
        CASE WHEN %(announced)s THEN %(effective_at)s::timestamptz END)
ON CONFLICT (name, language) DO UPDATE
SET template_id = coalesce(EXCLUDED.template_id, t.template_id),
    category = CASE
        WHEN %(announced)s THEN coalesce(t.category, EXCLUDED.category)
        WHEN t.category_at IS NULL OR t.category_at <= %(occurred_at)s THEN EXCLUDED.category
        ELSE t.category END,
    category_at = CASE
        WHEN %(announced)s THEN t.category_at
        ELSE greatest(t.category_at, EXCLUDED.category_at) END,
    announced_category = CASE
        WHEN %(announced)s THEN EXCLUDED.announced_category
        WHEN t.announced_category = EXCLUDED.category THEN NULL
        ELSE t.announced_category END,
    announced_at = CASE
        WHEN %(announced)s THEN EXCLUDED.announced_at
        WHEN t.announced_category = EXCLUDED.category THEN NULL
        ELSE t.announced_at END,
    announced_effective_at = CASE
        WHEN %(announced)s THEN EXCLUDED.announced_effective_at
        WHEN t.announced_category = EXCLUDED.category THEN NULL
        ELSE t.announced_effective_at END,
    updated_at = now()

-- name: wake_held_knocks
-- A template's state changed: documents holding their knock for a healthy template are due now (the next claim picks a template again; still none: held again).
UPDATE documents
SET next_attempt_at = now()
WHERE knock_held_since IS NOT NULL AND in_queue AND next_attempt_at > now()
  AND claim_token IS NULL
RETURNING id

-- name: template_states
-- Each configured (%(names)s[i], %(languages)s[i]): what the platform said, its problem, and its knocks of the last %(period)s (sent, delivered, failed, accepted but not delivered after %(undelivered_after)s).
SELECT c.name, c.language,
       template_problem(t) AS problem, template_sendable(t) AS sendable,
       t.status, t.status_at, t.status_reason, t.pause_count, t.paused_until,
       (t.status = 'PAUSED' AND t.paused_until <= now()) AS pause_lapsed, t.disable_date,
       -- Not rated yet (no quality webhook): the platform's own word for it.
       coalesce(t.quality, CASE WHEN t.status IS NOT NULL THEN 'UNKNOWN' END) AS quality,
       -- No category webhook: what the platform priced its latest knock as.
       coalesce(t.category,
                (SELECT upper(mp.category) FROM knocks pk
                 JOIN message_pricing mp ON mp.wa_message_id = pk.wa_message_id
                 WHERE pk.template = c.name AND pk.language = c.language
                   AND mp.category IS NOT NULL
                 ORDER BY mp.priced_at DESC LIMIT 1)) AS category,
       t.announced_category, t.announced_effective_at,
       t.refused_code, t.refused_until,
       count(k.id)::int AS knocks,
       count(k.id) FILTER (WHERE k.delivered_at IS NOT NULL OR k.read_at IS NOT NULL)::int
           AS delivered,
       count(k.id) FILTER (WHERE k.failed_at IS NOT NULL)::int AS failed,
       count(k.id) FILTER (WHERE k.state IN ('sent', 'unknown') AND k.delivered_at IS NULL
                             AND k.read_at IS NULL AND k.failed_at IS NULL
                             AND k.sent_at <= now() - %(undelivered_after)s)::int
           AS not_delivered
FROM unnest(%(names)s::text[], %(languages)s::text[]) WITH ORDINALITY AS c (name, language, position)
LEFT JOIN message_templates t ON t.name = c.name AND t.language = c.language
LEFT JOIN knocks k ON k.template = c.name AND k.language = c.language
                  AND k.sent_at > now() - %(period)s
GROUP BY c.position, c.name, c.language, t.name, t.language
ORDER BY c.position

-- name: knock_held_by_locale
-- Documents holding their knock for a healthy template (state 'knock_held'), per locale of their person: how many, the oldest's age, the oldest few ids (%(sample)s).
SELECT p.locale, count(*)::int AS held,
       extract(epoch FROM now() - min(d.knock_held_since))::float8 AS oldest_age_seconds,
       (array_agg(d.id ORDER BY d.knock_held_since, d.id))[1:%(sample)s] AS oldest_ids
FROM documents d
JOIN people p ON p.id = d.person_id
WHERE d.knock_held_since IS NOT NULL AND d.in_queue
GROUP BY p.locale
ORDER BY p.locale

-- ───────────────────────────────── knocks ────────────────────────────────

-- name: open_knock
-- Record a knock about to be sent from %(phone_number_id)s (state 'sending'; %(reminder)s: the one reminder, which marks its documents reminded) if our claim on %(document_id)s still holds, linked to it and to every other document of the person waiting to be delivered (one knock for all of them: the reply delivers them in turn); no row back: the claim is lost. Returns the knock and how many documents it asks about.
WITH knock AS (
    INSERT INTO knocks (person_id, template, language, reserved_at, previous_knock_at, reminder,
                        phone_number_id)
    SELECT %(person_id)s, %(template)s, %(language)s, %(reserved_at)s, %(previous_knock_at)s,
           %(reminder)s, %(phone_number_id)s
    WHERE EXISTS (SELECT 1 FROM documents
                  WHERE id = %(document_id)s AND claim_token = %(token)s)
    RETURNING id
),
linked AS (
    INSERT INTO knock_documents (knock_id, document_id)
    SELECT knock.id, d.id FROM knock CROSS JOIN documents d
    WHERE d.id = %(document_id)s
       -- A reminder: every document of theirs woken for its reminder (026).
       OR (%(reminder)s
           AND d.person_id = %(person_id)s AND d.remind_at IS NOT NULL
           AND d.reminded_at IS NULL
           AND d.delivered_at IS NULL AND d.abandoned_at IS NULL)
       OR (NOT %(reminder)s
           AND d.person_id = %(person_id)s AND d.status = 'succeeded'
           AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
           AND d.awaiting_review_since IS NULL AND d.knock_sent_at IS NULL
           AND NOT superseded(d)
           AND NOT (d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE (SELECT time_zone FROM people
                                                         WHERE id = %(person_id)s))::date))
    RETURNING knock_id, document_id
),
reminded AS (
    UPDATE documents d SET reminded_at = now()
    FROM linked WHERE %(reminder)s AND d.id = linked.document_id
    RETURNING d.id
)
SELECT id, (SELECT count(*) FROM linked)::integer AS documents FROM knock
WHERE EXISTS (SELECT 1 FROM linked)

-- name: knock_accepted
-- The knock's send was answered (%(state)s 'sent' with its message id) or its outcome is unknown ('unknown', counted as sent). Accepted, its template is approved: said so of a template no lifecycle webhook spoke of yet (status_at stays NULL, so the first webhook still applies).
WITH accepted AS (
    UPDATE knocks
    SET state = %(state)s, wa_message_id = coalesce(%(wa_message_id)s, wa_message_id)
    WHERE id = %(knock_id)s AND state = 'sending'
    RETURNING template, language, state
)
INSERT INTO message_templates AS t (name, language, status)
SELECT template, language, 'APPROVED' FROM accepted WHERE state = 'sent'
ON CONFLICT (name, language) DO UPDATE
SET status = 'APPROVED', updated_at = now()
WHERE t.status IS NULL AND t.status_at IS NULL

-- name: knock_refused
-- The send call refused the knock: it never left. Gives back the person's knock reservation it took.
WITH refused AS (
    UPDATE knocks
    SET state = 'refused', failed_at = now(), error_code = %(error_code)s, error = %(error)s
    WHERE id = %(knock_id)s
    RETURNING person_id, reserved_at, previous_knock_at
)
UPDATE people p
SET last_knock_at = refused.previous_knock_at
FROM refused
WHERE p.id = refused.person_id AND p.last_knock_at = refused.reserved_at

-- name: knock_by_status
-- The knock a status names: by the knock id of its tag (dp:knock:<id>) or by its message id.
SELECT k.id, k.person_id, k.template, k.language, k.state, k.wa_message_id, k.phone_number_id
FROM knocks k
WHERE k.id = %(knock_id)s OR k.wa_message_id = %(wa_message_id)s
ORDER BY k.id = %(knock_id)s DESC
LIMIT 1

-- name: knock_status
-- A sent / delivered / read status of a knock: its message id (a lost send answer), its delivery and reading times (never moved back); its documents learn the message id too.
WITH knock AS (
    UPDATE knocks
    SET wa_message_id = coalesce(wa_message_id, %(wa_message_id)s),
        state = CASE WHEN state IN ('sending', 'unknown') THEN 'sent' ELSE state END,
        delivered_at = CASE WHEN %(status)s IN ('delivered', 'read')
                            THEN coalesce(delivered_at, %(at)s) ELSE delivered_at END,
        read_at = CASE WHEN %(status)s = 'read' THEN coalesce(read_at, %(at)s) ELSE read_at END
    WHERE id = %(knock_id)s
    RETURNING id, wa_message_id
)
UPDATE documents d
SET knock_message_id = knock.wa_message_id
FROM knock JOIN knock_documents kd ON kd.knock_id = knock.id
WHERE d.id = kd.document_id AND d.knock_sent_at IS NOT NULL AND d.knock_message_id IS NULL

-- name: knock_failed
-- A failed status of a knock, marked once (a replay or a later duplicate is no row back). Its documents are read by knock_waiting_documents in a statement of their own: its snapshot is taken after this row lock, so a sender's await_reply that held the knock (FOR SHARE) has committed by then and its documents are seen waiting.
UPDATE knocks
SET state = 'failed', failed_at = %(at)s, error_code = %(error_code)s, error = %(error)s,
    wa_message_id = coalesce(wa_message_id, %(wa_message_id)s)
WHERE id = %(knock_id)s AND failed_at IS NULL
RETURNING id

-- name: knock_waiting_documents
-- The documents still waiting on this knock (their latest knock) after it failed.
SELECT coalesce(array_agg(d.id ORDER BY d.id), '{}') AS document_ids
FROM knock_documents kd
JOIN documents d ON d.id = kd.document_id
WHERE kd.knock_id = %(knock_id)s
  AND d.awaiting_reply_since IS NOT NULL AND d.delivered_at IS NULL AND d.abandoned_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM knock_documents later
                  WHERE later.document_id = d.id AND later.knock_id > kd.knock_id)

-- name: knock_failure_error
-- The error object of the failed status of a knock, as the platform sent it.
SELECT s.payload -> 'errors' -> 0 AS error
FROM knocks k
JOIN status_events s ON s.wa_message_id = k.wa_message_id AND s.status = 'failed'
WHERE k.id = %(knock_id)s

-- name: give_back_knock
-- The platform refused the knock later: the person's 24 h knock reservation it took is theirs again (unless another knock took it since).
UPDATE people p
SET last_knock_at = k.previous_knock_at
FROM knocks k
WHERE k.id = %(knock_id)s AND p.id = k.person_id AND p.last_knock_at = k.reserved_at

-- name: knock_unwait
-- A knock failed later: its documents stop waiting on the person and are due again after %(delay_seconds)s, knocking again then; %(attempt)s (1 or 0) is added to their attempts.
UPDATE documents
SET awaiting_reply_since = NULL, knock_sent_at = NULL,
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    delivery_attempts = delivery_attempts + %(attempt)s,
    last_delivery_error = %(error)s
WHERE id = ANY(%(document_ids)s) AND awaiting_reply_since IS NOT NULL
  AND delivered_at IS NULL AND abandoned_at IS NULL
RETURNING id, delivery_attempts

-- name: hold_knock
-- No template of the locale can knock: give the document back held (owner: the template), due again after %(delay_seconds)s or when a template recovers.
UPDATE documents
SET claim_token = NULL, claimed_at = NULL,
    knock_held_since = coalesce(knock_held_since, now()),
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    last_delivery_error = %(error)s
WHERE id = %(document_id)s AND claim_token = %(token)s
RETURNING id

-- name: check_knocks_not_delivered
-- Knocks of the last %(period)s the platform accepted but reported neither delivered, read nor failed after %(undelivered_after)s, oldest first: a dropped send (template pacing) looks like this, not like a person who did not answer.
SELECT k.id, k.person_id, k.template, k.language,
       extract(epoch FROM now() - k.sent_at)::float8 AS age_seconds,
       coalesce((SELECT array_agg(kd.document_id ORDER BY kd.document_id)
                 FROM knock_documents kd WHERE kd.knock_id = k.id), '{}') AS document_ids,
       count(*) OVER ()::int AS total
FROM knocks k
WHERE k.delivered_at IS NULL AND k.read_at IS NULL AND k.failed_at IS NULL
  AND k.state IN ('sent', 'unknown')
  AND k.sent_at <= now() - %(undelivered_after)s AND k.sent_at > now() - %(period)s
ORDER BY k.sent_at, k.id
LIMIT %(sample)s
