-- 010: review before delivery. A generated document of a kind listed in
-- DELIVERY_REVIEW_KINDS waits in `awaiting_review` (owner: reviewers) until a
-- reviewer approves it (as generated or edited) or rejects it with a reason.
-- Only an approved document enters the delivery queue; a rejected one is
-- abandoned as `rejected`. Alerts gain a channel, so the reviewers hear of
-- their own backlog.

ALTER TABLE documents
    -- set when the body is stored (generation, or `documents add`) for a
    -- review kind; cleared by the decision. Outside the queue index while set.
    ADD COLUMN awaiting_review_since timestamptz,
    ADD COLUMN review_decision text CHECK (review_decision IN ('approved', 'rejected')),
    ADD COLUMN reviewed_by text,
    ADD COLUMN reviewed_at timestamptz,
    -- why it was rejected (required then)
    ADD COLUMN review_reason text,
    -- the reviewer's edit, kept beside the generated body; NULL: approved as generated
    ADD COLUMN approved_body text,
    ADD CONSTRAINT documents_review_recorded_whole CHECK (
        (review_decision IS NULL) = (reviewed_at IS NULL)
        AND (review_decision IS NULL) = (reviewed_by IS NULL)),
    ADD CONSTRAINT documents_review_decided_once CHECK (
        review_decision IS NULL OR awaiting_review_since IS NULL),
    ADD CONSTRAINT documents_review_rejected_with_reason CHECK (
        review_decision IS DISTINCT FROM 'rejected' OR coalesce(btrim(review_reason), '') <> ''),
    ADD CONSTRAINT documents_review_rejected_is_abandoned CHECK (
        coalesce(review_decision = 'rejected', false) = coalesce(abandon_reason = 'rejected', false)),
    ADD CONSTRAINT documents_review_edit_is_approved CHECK (
        approved_body IS NULL OR review_decision = 'approved');

ALTER TABLE documents DROP CONSTRAINT documents_abandon_reason_check;
ALTER TABLE documents ADD CONSTRAINT documents_abandon_reason_check CHECK (abandon_reason IN
    ('stale', 'undeliverable', 'opted_out', 'max_attempts', 'unknown_outcome', 'unreachable',
     'operator', 'rejected'));

-- The queue predicate (006) gains "not awaiting review", so the guard stays
-- one flat probe however many documents wait for a reviewer. A generated
-- column cannot be altered before Postgres 17: dropped (with its indexes, the
-- queue and the per-person one of 007) and added again. eligible_documents() reads it by name and needs no change.
ALTER TABLE documents DROP COLUMN in_queue;
ALTER TABLE documents ADD COLUMN in_queue boolean GENERATED ALWAYS AS (
    status = 'succeeded' AND delivered_at IS NULL AND abandoned_at IS NULL
    AND awaiting_reply_since IS NULL AND awaiting_review_since IS NULL
) STORED;
CREATE INDEX documents_queue ON documents (next_attempt_at) WHERE in_queue;
CREATE INDEX documents_queue_by_person ON documents (person_id, generated_at, id) WHERE in_queue;

-- The review page, the CLI and the dwell check read the waiting ones oldest first.
CREATE INDEX documents_awaiting_review ON documents (awaiting_review_since, id)
    WHERE awaiting_review_since IS NOT NULL AND abandoned_at IS NULL;

-- THE text that is delivered (and previewed): the reviewer's edit when there
-- is one, else the generated body. Chunks are cut from this, nothing else.
CREATE FUNCTION delivery_body(d documents) RETURNS text
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(d.approved_body, d.body)
$$;

-- One state per document (001), with `awaiting_review` between generation
-- and delivery. An approved document is `undelivered` from its approval on.
CREATE OR REPLACE VIEW document_states AS
SELECT d.id, d.person_id, d.kind, d.for_date, d.abandon_reason,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN 'abandoned'
           WHEN d.delivered_at IS NOT NULL THEN 'delivered'
           WHEN d.status = 'pending' THEN 'pending'
           WHEN d.status = 'generating' THEN 'generating'
           WHEN d.status = 'failed' THEN 'generation_failed'
           WHEN d.awaiting_review_since IS NOT NULL THEN 'awaiting_review'
           WHEN d.awaiting_reply_since IS NOT NULL THEN 'awaiting_reply'
           ELSE 'undelivered'
       END AS state,
       CASE
           WHEN d.abandoned_at IS NOT NULL THEN d.abandoned_at
           WHEN d.delivered_at IS NOT NULL THEN d.delivered_at
           WHEN d.status IN ('pending', 'failed') THEN d.created_at
           WHEN d.status = 'generating' THEN coalesce(d.generation_claimed_at, d.created_at)
           WHEN d.awaiting_review_since IS NOT NULL THEN d.awaiting_review_since
           WHEN d.awaiting_reply_since IS NOT NULL THEN d.awaiting_reply_since
           ELSE coalesce(d.reviewed_at, d.generated_at, d.created_at)
       END AS since
FROM documents d;

-- Where an alert is posted: the ops channel, or the reviewers' (their own
-- backlog; REVIEW_WEBHOOK_URL, falling back to the ops channel).
ALTER TABLE ops_alerts ADD COLUMN channel text NOT NULL DEFAULT 'ops'
    CHECK (channel IN ('ops', 'reviewers'));
