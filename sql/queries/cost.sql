-- What messages cost (sql/migrations/023): each status's `pricing`, kept once per
-- message, and the delivery report's reading of it (reports/costs.py).

-- name: record_pricing
-- Keep the pricing of each message in %(records)s the first time a status
-- carries it (a redelivered or later status changes nothing). A knock tagged
-- by its knock id (sql/migrations/020) is charged to the first of the documents it knocked for.
INSERT INTO message_pricing (wa_message_id, document_id, part, chunk_index, country, billable,
                             category, pricing_model, pricing_type, priced_at)
SELECT r.wa_message_id,
       coalesce(r.document_id,
                (SELECT min(kd.document_id) FROM knock_documents kd WHERE kd.knock_id = r.knock_id)),
       r.part, r.chunk_index, r.country, r.billable,
       r.category, r.pricing_model, r.pricing_type, r.priced_at
FROM jsonb_to_recordset(%(records)s::jsonb) AS r (
    wa_message_id text, document_id bigint, knock_id bigint, part text, chunk_index integer,
    country text, billable boolean, category text, pricing_model text, pricing_type text,
    priced_at timestamptz)
ORDER BY r.wa_message_id
ON CONFLICT (wa_message_id) DO NOTHING

-- name: report_priced_messages
-- Messages priced in the day (the day their status said so), whatever they were for.
SELECT document_id, part, billable, category, country
FROM message_pricing
WHERE priced_at >= %(start)s AND priced_at < %(end)s

-- name: report_delivered_document_messages
-- Every priced message, of any day, of the documents delivered in the day.
SELECT p.document_id, p.part, p.billable, p.category, p.country
FROM documents d
JOIN message_pricing p ON p.document_id = d.id
WHERE d.delivered_at >= %(start)s AND d.delivered_at < %(end)s

-- name: report_lost_messages
-- Every priced message, of any day, of the documents abandoned in the day:
-- knocks and parts of documents that never arrived whole.
SELECT p.document_id, p.part, p.billable, p.category, p.country
FROM documents d
JOIN message_pricing p ON p.document_id = d.id
WHERE d.abandoned_at >= %(start)s AND d.abandoned_at < %(end)s

-- name: documents_delivered_count
-- How many documents were delivered in the day.
SELECT count(*)::int FROM documents WHERE delivered_at >= %(start)s AND delivered_at < %(end)s

-- name: report_delivered_ways
-- Each document delivered in the day, the way it went (documents.way, as report_documents reads it: one delivered before 039, by its knock), and its priced and billable messages of any day. A knock for several documents is priced on the first of them (record_pricing).
SELECT d.id AS document_id,
       coalesce(d.way, CASE WHEN d.knock_sent_at IS NULL THEN 'parts'
                            ELSE 'knock_then_parts' END) AS way,
       (SELECT count(*) FROM message_pricing p WHERE p.document_id = d.id)::int AS messages,
       (SELECT count(*) FROM message_pricing p
        WHERE p.document_id = d.id AND p.billable)::int AS billable
FROM documents d
WHERE d.delivered_at >= %(start)s AND d.delivered_at < %(end)s
