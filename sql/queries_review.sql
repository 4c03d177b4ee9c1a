-- Review before delivery (sql/010_review.sql): the reviewers' one rule and
-- what their page lists. Every way to decide (the CLI, the Dagster job, the
-- review page) runs decide_review; nothing else moves a document out of
-- 'awaiting_review' but the stale-brief abandonment (queries_generation.sql).

-- name: decide_review
-- A reviewer's decision, taken only while the document still awaits review: one conditional UPDATE, so of two reviewers acting at once exactly one gets the row back (the other's UPDATE waits for the row, then finds it decided and matches nothing). 'approved': into the delivery queue, due now, with the edited text %(body)s if given (kept beside the generated body). 'rejected': abandoned as 'rejected' with %(reason)s.
UPDATE documents
SET awaiting_review_since = NULL,
    review_decision = %(decision)s, reviewed_by = %(reviewer)s, reviewed_at = now(),
    review_reason = %(reason)s,
    -- an "edit" identical to the generated body is no edit
    approved_body = CASE WHEN %(decision)s = 'approved' THEN nullif(%(body)s, body) END,
    next_attempt_at = now(),
    abandoned_at = CASE WHEN %(decision)s = 'rejected' THEN now() END,
    abandon_reason = CASE WHEN %(decision)s = 'rejected' THEN 'rejected' END,
    last_delivery_error = CASE WHEN %(decision)s = 'rejected'
                               THEN left('rejected in review: ' || %(reason)s, 1000)
                               ELSE last_delivery_error END
WHERE id = %(document_id)s AND awaiting_review_since IS NOT NULL AND abandoned_at IS NULL
RETURNING id, person_id, review_decision, reviewed_by, reviewed_at

-- name: document_review
-- Where one document stands with the reviewers: the decision once taken (by whom, when), else what it waits on instead. Read after a decision matched nothing, to tell the reviewer why.
SELECT id, kind, status, awaiting_review_since, review_decision, reviewed_by, reviewed_at,
       review_reason, approved_body IS NOT NULL AS edited, abandoned_at, abandon_reason,
       delivered_at
FROM documents
WHERE id = %(document_id)s

-- name: awaiting_review
-- Documents awaiting review, oldest first (at most %(limit)s), each with its person and the text that would be delivered, and how many wait in all.
SELECT d.id, d.kind, d.for_date, delivery_body(d) AS body, d.awaiting_review_since,
       extract(epoch FROM now() - d.awaiting_review_since)::float8 AS age_seconds,
       p.id AS person_id, p.name, p.phone, p.locale, p.time_zone,
       p.opted_out_at IS NOT NULL AS opted_out,
       count(*) OVER () AS total
FROM documents d JOIN people p ON p.id = d.person_id
WHERE d.awaiting_review_since IS NOT NULL AND d.abandoned_at IS NULL
ORDER BY d.awaiting_review_since, d.id
LIMIT %(limit)s
