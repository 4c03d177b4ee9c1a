-- What the webhook service's /metrics shows from the database, read at scrape
-- time (delivery_pipeline/service/metrics.py). Every part is found through an
-- index of what waits (the open documents' partial indexes, the unsent alerts,
-- the waiting events), so a scrape's cost follows the backlog, not the history
-- (docs/benchmarks.md, "A /metrics scrape"). The states are counted branch by
-- branch rather than through the document_states view: joined back to the view
-- per open document, a backlog of 300,000 cost 2.3 s; counted where each
-- state's index leads, 0.1 s.

-- name: metrics_snapshot
-- Every gauge and database counter of /metrics as (metric, labels, value) rows: each waiting document state's count and oldest age (every state, zero too), documents abandoned in the last day by reason, the sending pause and the pacer per number, each template's health and its knocks unconfirmed, unsent ops alerts per channel and the poster's lease, the application events outbox per application, and the delivery-events outbox.
WITH states (state, n, since) AS (
    -- the document_states view's cases (sql/migrations/001), each through its partial index
    SELECT CASE status WHEN 'pending' THEN 'pending' ELSE 'generating' END, count(*),
           min(CASE status WHEN 'pending' THEN created_at
                           ELSE coalesce(generation_claimed_at, created_at) END)
    FROM documents
    WHERE status IN ('pending', 'generating') AND abandoned_at IS NULL AND delivered_at IS NULL
    GROUP BY 1
    UNION ALL
    SELECT 'generation_failed', count(*), min(created_at)
    FROM documents WHERE status = 'failed' AND abandoned_at IS NULL AND delivered_at IS NULL
    UNION ALL
    SELECT 'awaiting_review', count(*), min(awaiting_review_since)
    FROM documents
    WHERE awaiting_review_since IS NOT NULL AND abandoned_at IS NULL AND delivered_at IS NULL
      AND status NOT IN ('pending', 'generating', 'failed')
    UNION ALL
    SELECT 'awaiting_reply', count(*), min(awaiting_reply_since)
    FROM documents
    WHERE awaiting_reply_since IS NOT NULL AND delivered_at IS NULL AND abandoned_at IS NULL
      AND awaiting_review_since IS NULL AND status NOT IN ('pending', 'generating', 'failed')
    UNION ALL
    SELECT CASE WHEN knock_held_since IS NOT NULL THEN 'knock_held'
                WHEN quiet_until > now() THEN 'quiet_hours' ELSE 'undelivered' END,
           count(*), min(coalesce(knock_held_since, reviewed_at, generated_at, created_at))
    FROM documents WHERE in_queue
    GROUP BY 1
),
waiting_states (state) AS (
    VALUES ('pending'), ('generating'), ('generation_failed'), ('awaiting_review'),
           ('undelivered'), ('knock_held'), ('quiet_hours'), ('awaiting_reply')
)
SELECT 'documents' AS metric, jsonb_build_object('state', w.state) AS labels,
       coalesce(sum(s.n), 0)::float8 AS value
FROM waiting_states w LEFT JOIN states s ON s.state = w.state
GROUP BY w.state
UNION ALL
SELECT 'documents_oldest_age_seconds', jsonb_build_object('state', w.state),
       coalesce(extract(epoch FROM now() - min(s.since)), 0)::float8
FROM waiting_states w LEFT JOIN states s ON s.state = w.state
GROUP BY w.state
UNION ALL
SELECT 'documents_abandoned_last_day', jsonb_build_object('reason', abandon_reason),
       count(*)::float8
FROM documents WHERE abandoned_at > now() - interval '1 day'
GROUP BY abandon_reason
UNION ALL
SELECT 'sending_paused', jsonb_build_object('phone_number_id', phone_number_id),
       (paused_at IS NOT NULL)::int::float8
FROM sender_state
UNION ALL
SELECT 'sending_paused_seconds', jsonb_build_object('phone_number_id', phone_number_id),
       coalesce(extract(epoch FROM now() - paused_at), 0)::float8
FROM sender_state
UNION ALL
SELECT 'sending_pause_refused_sends', jsonb_build_object('phone_number_id', phone_number_id),
       refused_sends::float8
FROM sender_state
UNION ALL
SELECT 'pacer_booked_ahead_seconds', jsonb_build_object('phone_number_id', phone_number_id),
       greatest(extract(epoch FROM next_slot - clock_timestamp()), 0)::float8
FROM send_pacer
UNION ALL
SELECT 'pacer_throttles', jsonb_build_object('phone_number_id', phone_number_id),
       throttles::float8
FROM send_pacer
UNION ALL
SELECT 'template_sendable', jsonb_build_object('name', t.name, 'language', t.language),
       template_sendable(t)::int::float8
FROM message_templates t
UNION ALL
SELECT 'template_healthy',
       jsonb_build_object('name', t.name, 'language', t.language,
                          'status', coalesce(t.status, ''), 'quality', coalesce(t.quality, '')),
       (template_problem(t) IS NULL)::int::float8
FROM message_templates t
UNION ALL
SELECT 'knocks_unconfirmed', jsonb_build_object('template', template, 'language', language),
       count(*)::float8
FROM knocks
WHERE delivered_at IS NULL AND read_at IS NULL AND failed_at IS NULL
  AND sent_at > now() - interval '1 day' AND state IN ('sent', 'unknown')
GROUP BY template, language
UNION ALL
SELECT 'ops_alerts_unsent', jsonb_build_object('channel', channel), count(*)::float8
FROM ops_alerts WHERE sent_at IS NULL AND created_at > now() - interval '1 day'
GROUP BY channel
UNION ALL
SELECT 'ops_alerts_unsent_oldest_age_seconds', jsonb_build_object('channel', channel),
       extract(epoch FROM now() - min(created_at))::float8
FROM ops_alerts WHERE sent_at IS NULL AND created_at > now() - interval '1 day'
GROUP BY channel
UNION ALL
SELECT 'ops_alert_poster_leased', '{}'::jsonb, (leased_until > now())::int::float8
FROM ops_alert_poster
UNION ALL
SELECT 'api_events_waiting', jsonb_build_object('application', e.application),
       coalesce(w.n, 0)::float8
FROM api_endpoints e
LEFT JOIN LATERAL (
    SELECT count(*) AS n, min(v.created_at) AS oldest FROM api_events v
    WHERE v.application = e.application AND v.delivered_at IS NULL AND v.expired_at IS NULL
) w ON true
WHERE e.removed_at IS NULL
UNION ALL
SELECT 'api_events_oldest_age_seconds', jsonb_build_object('application', e.application),
       coalesce(extract(epoch FROM now() - w.oldest), 0)::float8
FROM api_endpoints e
LEFT JOIN LATERAL (
    SELECT min(v.created_at) AS oldest FROM api_events v
    WHERE v.application = e.application AND v.delivered_at IS NULL AND v.expired_at IS NULL
) w ON true
WHERE e.removed_at IS NULL
UNION ALL
SELECT 'api_endpoint_failing', jsonb_build_object('application', application),
       (failing_since IS NOT NULL)::int::float8
FROM api_endpoints WHERE removed_at IS NULL
UNION ALL
SELECT 'delivery_events_unreported', '{}'::jsonb, count(*)::float8
FROM delivery_events WHERE reported_at IS NULL
UNION ALL
SELECT 'delivery_events_unreported_oldest_age_seconds', '{}'::jsonb,
       coalesce(extract(epoch FROM now() - min(occurred_at)), 0)::float8
FROM delivery_events WHERE reported_at IS NULL
