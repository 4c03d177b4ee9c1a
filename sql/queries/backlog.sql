-- The backlog the Dagster UI shows: read from the document_states view (001),
-- the one definition of which state a document is in.

-- name: backlog_by_state
-- Count and oldest age (seconds) per waiting state, plus documents delivered and abandoned (by reason) since the start of today, UTC.
SELECT state,
       coalesce(abandon_reason, '') AS reason,
       count(*) AS count,
       extract(epoch FROM now() - min(since))::float8 AS oldest_age_seconds
FROM document_states
WHERE state IN ('pending', 'generating', 'awaiting_review', 'undelivered', 'awaiting_reply',
                'quiet_hours', 'generation_failed')
   OR since >= date_trunc('day', now(), 'UTC')
GROUP BY state, coalesce(abandon_reason, '')
ORDER BY state, reason
