-- A document's file (delivery_pipeline/files/stored.py, sql/migrations/037): what it is drawn
-- from, the file of its current body, and its bytes.

-- name: document_file_source
-- What document %(document_id)s's file is drawn from: its kind, the person's locale and name, its day (its for_date, else the day it was generated on, in the person's time zone) and the body it is delivered with; nothing while it has no body.
SELECT d.kind, p.locale, p.name,
       coalesce(d.for_date,
                (coalesce(d.generated_at, d.created_at) AT TIME ZONE p.time_zone)::date) AS day,
       delivery_body(d) AS body
FROM documents d
JOIN people p ON p.id = d.person_id
WHERE d.id = %(document_id)s AND d.status = 'succeeded' AND delivery_body(d) IS NOT NULL

-- name: document_file
-- Document %(document_id)s's file, without its bytes.
SELECT document_id, source_sha256, sha256, filename, mime_type, size_bytes, rendered_at
FROM document_files WHERE document_id = %(document_id)s

-- name: store_document_file
-- Keep a file drawn for document %(document_id)s, replacing one drawn from another source; nothing when the same source's file is there already (another process drew it meanwhile: the same bytes).
INSERT INTO document_files
    (document_id, source_sha256, sha256, filename, mime_type, size_bytes, content)
VALUES (%(document_id)s, %(source_sha256)s, %(sha256)s, %(filename)s, %(mime_type)s,
        octet_length(%(content)s::bytea), %(content)s)
ON CONFLICT (document_id) DO UPDATE
SET source_sha256 = EXCLUDED.source_sha256, sha256 = EXCLUDED.sha256,
    filename = EXCLUDED.filename, mime_type = EXCLUDED.mime_type,
    size_bytes = EXCLUDED.size_bytes, content = EXCLUDED.content, rendered_at = now()
WHERE document_files.source_sha256 <> EXCLUDED.source_sha256
RETURNING document_id, source_sha256, sha256, filename, mime_type, size_bytes, rendered_at

-- name: document_file_content
-- The bytes of document %(document_id)s's file, if it is still the one with hash %(sha256)s.
SELECT content FROM document_files
WHERE document_id = %(document_id)s AND sha256 = %(sha256)s

-- name: file_words
-- What document %(document_id)s's file is called and dated in its messages: its kind, the person's locale and name, its day (as its file's).
SELECT d.kind, p.locale, p.name,
       coalesce(d.for_date,
                (coalesce(d.generated_at, d.created_at) AT TIME ZONE p.time_zone)::date) AS day
FROM documents d
JOIN people p ON p.id = d.person_id
WHERE d.id = %(document_id)s

-- name: choose_file_way
-- Under our claim, before the file's send is fenced: document %(document_id)s goes as a file (%(way)s: 'file' on the document template %(template)s / %(language)s, or 'file_in_window'), so that its ledger is read as a file's and a failed status holds the template it named. Nothing when the claim is lost.
UPDATE documents
SET way = %(way)s, file_template = %(template)s, file_template_language = %(language)s
WHERE id = %(document_id)s AND claim_token = %(token)s
RETURNING id

-- name: forget_file_ledger
-- Under our claim: document %(document_id)s's file is not sent after all (no healthy document template, the window closed on a document message): its ledger row goes, if it never left (pending or failed), and its way is %(way)s again (NULL: decided afresh; 'parts': never a file). Returns whether its ledger is empty now (false: the file's send left, or its outcome is unknown, and nothing changed); nothing when the claim is lost.
WITH doc AS (
    SELECT d.id, d.way IN ('file', 'file_in_window')
                 AND NOT EXISTS (SELECT 1 FROM delivery_chunks c
                                 WHERE c.document_id = d.id
                                   AND c.state NOT IN ('pending', 'failed')) AS unsent
    FROM documents d
    WHERE d.id = %(document_id)s AND d.claim_token = %(token)s
    FOR UPDATE
),
gone AS (
    DELETE FROM delivery_chunks c USING doc
    WHERE c.document_id = doc.id AND doc.unsent
    RETURNING c.document_id
)
UPDATE documents d
SET way = CASE WHEN doc.unsent THEN %(way)s ELSE d.way END,
    file_template = CASE WHEN doc.unsent THEN NULL ELSE d.file_template END,
    file_template_language = CASE WHEN doc.unsent THEN NULL ELSE d.file_template_language END
FROM doc
WHERE d.id = doc.id
RETURNING doc.unsent OR NOT EXISTS (SELECT 1 FROM delivery_chunks c WHERE c.document_id = d.id)

-- name: document_without_file
-- The platform refused document %(document_id)s's file (delivery/completer.py): it goes as text from now on (way 'parts': parts in the window, the knock outside it), whoever holds it; its file's ledger row goes unless it left. Counted in chunk_failures, so that a sender finishing the file meanwhile does not mark the document delivered (sql/migrations/028).
WITH gone AS (
    DELETE FROM delivery_chunks c
    USING documents d
    WHERE d.id = %(document_id)s AND c.document_id = d.id
      AND d.way IN ('file', 'file_in_window') AND c.state IN ('pending', 'failed')
    RETURNING c.document_id
)
UPDATE documents
SET way = 'parts', file_template = NULL, file_template_language = NULL,
    chunk_failures = chunk_failures + 1
WHERE id = %(document_id)s AND (way IS NULL OR way IN ('file', 'file_in_window'))
  AND delivered_at IS NULL
RETURNING id

-- name: way_summary
-- Delivered documents by the way they went (sql/migrations/039; one delivered before 039, by its knock): all of them, and those of the last %(period)s.
SELECT coalesce(way, CASE WHEN knock_sent_at IS NULL THEN 'parts' ELSE 'knock_then_parts' END)
           AS way,
       count(*)::int AS delivered,
       count(*) FILTER (WHERE delivered_at > now() - %(period)s::interval)::int AS recent
FROM documents
WHERE delivered_at IS NOT NULL
GROUP BY 1
ORDER BY 1

-- name: set_outside_window
-- Person %(person_id)s's documents outside the window go as %(outside_window)s ('knock', 'file'; NULL: by kind, DELIVERY_FILE_OUTSIDE_WINDOW).
UPDATE people SET outside_window = %(outside_window)s WHERE id = %(person_id)s RETURNING *
