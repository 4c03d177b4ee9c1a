-- An operator's actions on one document (store/operator.py): cancel and
-- resend, through the claim. Each runs in one transaction that first locks the
-- document row, so the state read, the action recorded and the change made
-- agree, and a sender's claim, fence or finish either committed before (and is
-- seen) or waits and then finds the claim revoked (sql/migrations/025).

-- name: lock_document
-- Lock one document's row for an operator's action (inside the action's transaction).
SELECT id FROM documents WHERE id = %(document_id)s FOR UPDATE

-- name: operator_document
-- One document as an operator acts on it: its state, whether a sender holds a live claim (%(lease)s), and how many of its parts may have reached the person, of how many.
SELECT d.id, d.person_id, d.kind, s.state, d.status, d.delivered_at, d.abandoned_at,
       d.abandon_reason, d.awaiting_review_since IS NOT NULL AS awaiting_review,
       coalesce(d.claim_token IS NOT NULL AND d.claimed_at >= now() - %(lease)s, false)
           AS in_flight,
       (SELECT count(*) FROM delivery_chunks c
        WHERE c.document_id = d.id AND c.state IN ('sent', 'sending', 'unknown'))::integer
           AS parts_sent,
       (SELECT count(*) FROM delivery_chunks c WHERE c.document_id = d.id)::integer AS parts
FROM documents d JOIN document_states s ON s.id = d.id
WHERE d.id = %(document_id)s

-- name: recent_resends
-- How many times document %(document_id)s was resent within %(window)s, and when the oldest of those was: the daily cap reads it under the document's row lock (lock_document), so two operators at once never both take the last resend.
SELECT count(*)::integer AS resends, min(a.at) AS oldest
FROM document_actions a
WHERE a.document_id = %(document_id)s AND a.action = 'resend' AND a.at > now() - %(window)s

-- name: record_document_action
-- Record an operator's action; a resend keeps the ledger as it was (without the texts), since it starts again.
INSERT INTO document_actions (document_id, action, operator, reason, from_state, parts_sent,
                              in_flight, ledger)
SELECT %(document_id)s, %(action)s, %(operator)s, %(reason)s, %(from_state)s, %(parts_sent)s,
       %(in_flight)s,
       CASE WHEN %(action)s = 'resend' THEN (
           SELECT coalesce(jsonb_agg(to_jsonb(c) - 'body' ORDER BY c.chunk_index), '[]'::jsonb)
           FROM delivery_chunks c WHERE c.document_id = %(document_id)s) END
RETURNING id, at

-- name: cancel_document
-- Abandon an open document as cancelled and revoke any claim on it: a sender in flight is fenced out before its next part (the part in the air is still recorded), a generator's result is not stored.
UPDATE documents
SET abandoned_at = now(), abandon_reason = 'cancelled', last_delivery_error = left(%(why)s, 1000),
    claim_token = NULL, claimed_at = NULL,
    generation_claim_token = NULL, generation_claimed_at = NULL
WHERE id = %(document_id)s AND delivered_at IS NULL AND abandoned_at IS NULL
  AND status <> 'failed'
RETURNING id

-- name: reopen_for_resend
-- Put a delivered or abandoned (not rejected, not unreviewed) document back in the queue, due now, as new: no attempts, no knock yet (the person's one knock per 24 h still holds). Never while a sender holds a live claim (%(lease)s).
UPDATE documents
SET delivered_at = NULL, abandoned_at = NULL, abandon_reason = NULL,
    last_delivery_error = left(%(why)s, 1000), next_attempt_at = now(), delivery_attempts = 0,
    knock_sent_at = NULL, knock_message_id = NULL, awaiting_reply_since = NULL,
    quiet_until = NULL, claim_token = NULL, claimed_at = NULL,
    -- The ledger keeps its form (sql/migrations/039): a file is sent again as a file.
    way = CASE way WHEN 'knock_then_parts' THEN 'parts' WHEN 'knock_then_file' THEN 'file_in_window'
                   ELSE way END
WHERE id = %(document_id)s AND status = 'succeeded' AND awaiting_review_since IS NULL
  AND (delivered_at IS NOT NULL
       OR (abandoned_at IS NOT NULL AND abandon_reason IS DISTINCT FROM 'rejected'))
  AND (claim_token IS NULL OR claimed_at < now() - %(lease)s)
RETURNING id

-- name: reset_ledger_for_resend
-- Every part of a resent document back to 'pending' under the tag of its next attempt: sent again, and a late status for an earlier attempt settles nothing.
UPDATE delivery_chunks
SET state = 'pending',
    callback_data = 'dp:' || document_id || ':' || chunk_index || ':' || (send_attempts + 1),
    wa_message_id = NULL, sent_at = NULL, unknown_since = NULL, delivered_at = NULL,
    read_at = NULL, failed_at = NULL, error_code = NULL, started_at = now()
WHERE document_id = %(document_id)s

-- name: document_actions
-- What operators did to a document, newest first.
SELECT id, action, operator, reason, at, from_state, parts_sent, in_flight
FROM document_actions WHERE document_id = %(document_id)s ORDER BY id DESC
