-- 037: documents as files, and each file's media ids (docs/design/files.md).
--
-- document_files: a document's body rendered once as a PDF (delivery_pipeline/files),
-- the one file of its current body. source_sha256 hashes everything it was drawn
-- from (the layout, the title's words, the person's name, the date, the body), so a
-- body approved with edits, or a renamed person, is drawn again; sha256 hashes its
-- bytes, what an upload carries. It lives no longer than its body (ON DELETE
-- CASCADE) and, being derived, less: the prune_history job deletes the files of
-- finished documents (store/retention.py); a resend draws it again.
CREATE TABLE document_files (
    document_id   bigint PRIMARY KEY REFERENCES documents (id) ON DELETE CASCADE,
    source_sha256 text NOT NULL,
    sha256        text NOT NULL,
    filename      text NOT NULL,
    mime_type     text NOT NULL,
    size_bytes    integer NOT NULL,
    content       bytea NOT NULL,
    rendered_at   timestamptz NOT NULL DEFAULT now(),
    CHECK (size_bytes = octet_length(content))
);
-- A PDF's streams are compressed already: TOAST keeps the bytes out of line
-- without trying to compress them again.
ALTER TABLE document_files ALTER COLUMN content SET STORAGE EXTERNAL;
-- Retention reads the oldest first.
CREATE INDEX document_files_rendered ON document_files (rendered_at, document_id);

-- document_media: a file uploaded to one business number (POST /{number}/media).
-- A media id belongs to the number that uploaded it and lasts 30 days; the row
-- holds the current one (media_id, expires_at) and how many uploads it took. The
-- upload is leased (upload_token, upload_started_at), so that of several senders
-- at once one uploads and the others wait for its id (delivery/media.py). An id a
-- send was refused with is dropped (dropped_at): the next send uploads again. A
-- file the platform refused at upload (upload_refusal_code) is never uploaded to
-- that number again. The id is recorded before any send uses it: a crash after
-- the upload loses nothing but that upload.
CREATE TABLE document_media (
    document_id         bigint NOT NULL REFERENCES document_files (document_id)
                            ON DELETE CASCADE,
    phone_number_id     text NOT NULL,
    sha256              text NOT NULL,
    media_id            text,
    uploaded_at         timestamptz,
    expires_at          timestamptz,
    uploads             integer NOT NULL DEFAULT 0,
    upload_token        uuid,
    upload_started_at   timestamptz,
    dropped_at          timestamptz,
    dropped_reason      text,
    upload_refusal_code integer,
    upload_refusal      text,
    PRIMARY KEY (document_id, phone_number_id, sha256),
    CHECK ((media_id IS NULL) = (uploaded_at IS NULL) AND (media_id IS NULL) = (expires_at IS NULL)),
    CHECK ((upload_token IS NULL) = (upload_started_at IS NULL))
);
