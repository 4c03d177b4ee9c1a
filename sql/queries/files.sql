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
