-- A file's media id on each business number (delivery/media.py, sql/migrations/037): reused
-- while valid, uploaded by one sender at a time under a lease, recorded before
-- any send uses it. %(margin)s: how long before its expiry an id is no longer
-- handed out; %(lease)s: how long an upload holds the others back.

-- name: document_media
-- The media id of file %(sha256)s of document %(document_id)s on number %(phone_number_id)s and whether it may be used now; whether another sender is uploading it; a refusal of the upload.
SELECT media_id,
       coalesce(media_id IS NOT NULL AND dropped_at IS NULL
                AND expires_at > now() + %(margin)s, false) AS usable,
       coalesce(upload_started_at > now() - %(lease)s, false) AS uploading,
       upload_refusal_code, upload_refusal, uploads
FROM document_media
WHERE document_id = %(document_id)s AND phone_number_id = %(phone_number_id)s
  AND sha256 = %(sha256)s

-- name: lease_media_upload
-- Take the upload of file %(sha256)s of document %(document_id)s to number %(phone_number_id)s, under %(token)s: only when it has no usable id, was never refused, and nobody's lease on it is current. Nothing when another sender holds it (or it needs no upload).
INSERT INTO document_media
    (document_id, phone_number_id, sha256, upload_token, upload_started_at)
VALUES (%(document_id)s, %(phone_number_id)s, %(sha256)s, %(token)s, now())
ON CONFLICT (document_id, phone_number_id, sha256) DO UPDATE
SET upload_token = EXCLUDED.upload_token, upload_started_at = now()
WHERE document_media.upload_refusal_code IS NULL
  AND NOT coalesce(document_media.media_id IS NOT NULL AND document_media.dropped_at IS NULL
                   AND document_media.expires_at > now() + %(margin)s, false)
  AND (document_media.upload_started_at IS NULL
       OR document_media.upload_started_at <= now() - %(lease)s)
RETURNING upload_token

-- name: record_media_upload
-- The upload under %(token)s gave %(media_id)s: it is the file's id on the number from now on, lasting %(lifetime)s from when the upload began; the lease ends. Nothing if the lease was lost.
UPDATE document_media
SET media_id = %(media_id)s, uploaded_at = now(),
    expires_at = upload_started_at + %(lifetime)s, uploads = uploads + 1,
    dropped_at = NULL, dropped_reason = NULL, upload_token = NULL, upload_started_at = NULL
WHERE document_id = %(document_id)s AND phone_number_id = %(phone_number_id)s
  AND sha256 = %(sha256)s AND upload_token = %(token)s
RETURNING media_id

-- name: refuse_media_upload
-- The platform refused the upload under %(token)s (%(code)s): this file is not uploaded to this number again.
UPDATE document_media
SET upload_refusal_code = %(code)s, upload_refusal = %(refusal)s,
    upload_token = NULL, upload_started_at = NULL
WHERE document_id = %(document_id)s AND phone_number_id = %(phone_number_id)s
  AND sha256 = %(sha256)s AND upload_token = %(token)s
RETURNING upload_refusal_code

-- name: release_media_upload
-- The upload under %(token)s ended without an id (the network, a passing error): the next sender may try at once.
UPDATE document_media SET upload_token = NULL, upload_started_at = NULL
WHERE document_id = %(document_id)s AND phone_number_id = %(phone_number_id)s
  AND sha256 = %(sha256)s AND upload_token = %(token)s
RETURNING document_id

-- name: drop_media
-- A send naming %(media_id)s (document %(document_id)s, number %(phone_number_id)s) was refused: that id is not handed out again; the next send uploads the file anew.
UPDATE document_media SET dropped_at = now(), dropped_reason = %(reason)s
WHERE document_id = %(document_id)s AND phone_number_id = %(phone_number_id)s
  AND media_id = %(media_id)s AND dropped_at IS NULL
RETURNING media_id
