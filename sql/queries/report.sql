-- The daily delivery report (reports/report.py): raw rows for one
-- day [%(start)s, %(end)s); pandas does the counting and the percentiles.

-- name: report_documents
-- Documents generated or delivered in the day: when each was generated and delivered, the business number it went out from (sql/migrations/027; '' before it was claimed), and the way it went (sql/migrations/039; one delivered before 039, by its knock; '' while not delivered).
SELECT id, kind, coalesce(generated_at, created_at) AS generated_at, delivered_at,
       generated_at >= %(start)s AND generated_at < %(end)s AS generated_in_day,
       delivered_at >= %(start)s AND delivered_at < %(end)s AS delivered_in_day,
       coalesce(phone_number_id, '') AS phone_number_id,
       CASE WHEN delivered_at IS NULL THEN ''
            ELSE coalesce(way, CASE WHEN knock_sent_at IS NULL THEN 'parts'
                                    ELSE 'knock_then_parts' END) END AS way
FROM documents
WHERE (generated_at >= %(start)s AND generated_at < %(end)s)
   OR (delivered_at >= %(start)s AND delivered_at < %(end)s)

-- name: report_chunks
-- Chunks accepted by the platform in the day, and whether status webhooks have since reported them delivered and read; the business number they went from.
SELECT c.document_id, c.chunk_index, c.state,
       c.delivered_at IS NOT NULL OR c.read_at IS NOT NULL AS delivered,
       c.read_at IS NOT NULL AS read,
       coalesce(d.phone_number_id, '') AS phone_number_id
FROM delivery_chunks c JOIN documents d ON d.id = c.document_id
WHERE c.sent_at >= %(start)s AND c.sent_at < %(end)s

-- name: report_knocks
-- Knocks sent in the day: reported delivered, seen (a `read` status on the knock's message), answered (the person wrote after it).
SELECT d.id, d.person_id, d.knock_sent_at,
       knock_delivered(d) AS delivered,
       EXISTS (SELECT 1 FROM status_events s
               WHERE s.wa_message_id = d.knock_message_id AND s.status = 'read') AS seen,
       knock_answered(d) AS answered
FROM documents d
WHERE d.knock_sent_at >= %(start)s AND d.knock_sent_at < %(end)s

-- name: report_abandoned
-- Documents abandoned in the day with their reason, and those whose generation failed (reason 'generation_failed').
SELECT id, abandon_reason AS reason
FROM documents WHERE abandoned_at >= %(start)s AND abandoned_at < %(end)s
UNION ALL
SELECT id, 'generation_failed'
FROM documents
WHERE status = 'failed' AND generation_failed_at >= %(start)s AND generation_failed_at < %(end)s

-- name: report_knock_outcomes
-- Every knock that left in the day (not refused at the send), the business number it left from, and what came of it, one outcome each: 'answered' (the person wrote after it, a Send it included), 'later' / 'stop' (a press or its word answered it), else unanswered: 'not_wanted' (read, no answer), 'not_seen' (delivered, never read), 'expired' (not delivered within its template's time to live: the platform dropped it), 'never_delivered' (the platform never delivered it, or failed it). `reminder`: it was the one reminder.
SELECT k.id, k.reminder, coalesce(k.phone_number_id, '') AS phone_number_id,
       CASE
           WHEN r.action IN ('later', 'stop') THEN r.action
           WHEN r.action IS NOT NULL OR answered.yes THEN 'answered'
           WHEN k.read_at IS NOT NULL THEN 'not_wanted'
           WHEN k.delivered_at IS NOT NULL AND k.failed_at IS NULL THEN 'not_seen'
           WHEN k.expired_at IS NOT NULL THEN 'expired'
           ELSE 'never_delivered'
       END AS outcome
FROM knocks k
LEFT JOIN LATERAL (
    SELECT kr.action FROM knock_replies kr WHERE kr.knock_id = k.id ORDER BY kr.at, kr.id LIMIT 1
) r ON true
CROSS JOIN LATERAL (
    SELECT EXISTS (
        SELECT 1 FROM inbound_messages i
        WHERE i.person_id = k.person_id AND i.sent_at >= date_trunc('second', k.sent_at)
          AND i.message_type NOT IN ('system', 'ephemeral')
          AND NOT EXISTS (SELECT 1 FROM knocks n
                          WHERE n.person_id = k.person_id AND n.sent_at > k.sent_at
                            AND n.sent_at <= i.sent_at AND n.state <> 'refused')
    ) AS yes
) answered
WHERE k.sent_at >= %(start)s AND k.sent_at < %(end)s AND k.state NOT IN ('refused', 'sending')

-- name: report_knock_presses
-- Each Stop and Later (and Send it, Start) asked for in the day, by button or by word.
SELECT action, via, count(*)::integer AS presses
FROM knock_replies WHERE at >= %(start)s AND at < %(end)s
GROUP BY action, via ORDER BY action, via
