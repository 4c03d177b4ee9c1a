-- The daily delivery report (delivery_pipeline/report.py): raw rows for one
-- day [%(start)s, %(end)s); pandas does the counting and the percentiles.

-- name: report_documents
-- Documents generated or delivered in the day: when each was generated and delivered.
SELECT id, kind, coalesce(generated_at, created_at) AS generated_at, delivered_at,
       generated_at >= %(start)s AND generated_at < %(end)s AS generated_in_day,
       delivered_at >= %(start)s AND delivered_at < %(end)s AS delivered_in_day
FROM documents
WHERE (generated_at >= %(start)s AND generated_at < %(end)s)
   OR (delivered_at >= %(start)s AND delivered_at < %(end)s)

-- name: report_chunks
-- Chunks accepted by the platform in the day, and whether status webhooks have since reported them delivered and read.
SELECT document_id, chunk_index, state,
       delivered_at IS NOT NULL OR read_at IS NOT NULL AS delivered,
       read_at IS NOT NULL AS read
FROM delivery_chunks
WHERE sent_at >= %(start)s AND sent_at < %(end)s

-- name: report_knocks
-- Knocks sent in the day: reported delivered, seen (a `read` status on the knock's message), answered (the person wrote after it).
SELECT d.id, d.person_id, d.knock_sent_at,
       EXISTS (SELECT 1 FROM status_events s
               WHERE s.wa_message_id = d.knock_message_id
                 AND s.status IN ('delivered', 'read')) AS delivered,
       EXISTS (SELECT 1 FROM status_events s
               WHERE s.wa_message_id = d.knock_message_id AND s.status = 'read') AS seen,
       EXISTS (SELECT 1 FROM inbound_messages i
               WHERE i.person_id = d.person_id AND i.sent_at > d.knock_sent_at) AS answered
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
