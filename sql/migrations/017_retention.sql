-- 017: history is kept for a while, not forever (store/retention.py, the
-- prune_history job). raw_webhooks, status_events, inbound_messages and
-- ops_alerts lose their rows older than RETENTION_*_DAYS, oldest first, a
-- bounded batch per statement, except the rows something still reads. This
-- migration gives each table an index on its age (with its key, so a batch
-- continues right after the last row the previous one looked at), keeps a raw
-- body once however often it is replayed, and marks which alerts are episodes.

-- ── raw bodies: once each ───────────────────────────────────────────────

-- A body replayed with a valid signature (one unused field makes Meta's, or
-- anybody's with the app secret, kept raw) stored another copy of up to 4 MiB
-- each time. A body is now kept once, by its SHA-256: a replay counts, and
-- moves its last_received_at (its age for retention), its reason the latest.
ALTER TABLE raw_webhooks
    ADD COLUMN body_sha256 bytea GENERATED ALWAYS AS (sha256(body)) STORED,
    ADD COLUMN received_count integer NOT NULL DEFAULT 1,
    ADD COLUMN last_received_at timestamptz;

WITH copies AS (
    SELECT body_sha256, min(id) AS first_id, count(*) AS n, max(received_at) AS last_at,
           (array_agg(reason ORDER BY received_at DESC, id DESC))[1] AS last_reason
    FROM raw_webhooks GROUP BY body_sha256
),
merged AS (
    UPDATE raw_webhooks r
    SET received_count = c.n, last_received_at = c.last_at, reason = c.last_reason
    FROM copies c WHERE r.id = c.first_id
    RETURNING r.id
)
DELETE FROM raw_webhooks r
USING copies c
WHERE r.body_sha256 = c.body_sha256 AND r.id <> c.first_id;

ALTER TABLE raw_webhooks
    ALTER COLUMN last_received_at SET DEFAULT now(),
    ALTER COLUMN last_received_at SET NOT NULL;

CREATE UNIQUE INDEX raw_webhooks_body ON raw_webhooks (body_sha256);
CREATE INDEX raw_webhooks_age ON raw_webhooks (last_received_at, id);

-- ── statuses and inbound messages ───────────────────────────────────────

-- Our own clock (received_at), not the platform's timestamps.
CREATE INDEX status_events_age ON status_events (received_at, wa_message_id, status);
CREATE INDEX inbound_messages_age ON inbound_messages (received_at, wa_message_id);

-- The knocks still waiting on their person: their statuses stay (sql/queries_retention.sql).
-- Only those documents are in it, so the probe per status costs nothing as history grows.
CREATE INDEX documents_knock_awaiting ON documents (knock_message_id)
    WHERE knock_message_id IS NOT NULL AND awaiting_reply_since IS NOT NULL
      AND delivered_at IS NULL AND abandoned_at IS NULL;

-- ── ops alerts ──────────────────────────────────────────────────────────

-- A check's episode (note_check: alert, escalation, reminders, resolved) is
-- read as a whole while it is open: its newest row says whether it is, at
-- which severity, and when to remind. Other alerts are one-shot notices
-- (record_alert's quiet hour, record_once's failed run). Alerts written
-- before this migration are episodes when their key was ever reminded or
-- resolved, or is a check's or the watchdog's.
ALTER TABLE ops_alerts ADD COLUMN episode boolean NOT NULL DEFAULT false;
UPDATE ops_alerts SET episode = true
WHERE dedup_key LIKE 'check:%' OR dedup_key LIKE 'watchdog:%'
   OR dedup_key IN (SELECT dedup_key FROM ops_alerts WHERE kind IN ('reminder', 'resolved'));

CREATE INDEX ops_alerts_age ON ops_alerts (created_at, id);
-- Where each key's episodes were resolved: "is this row's episode closed?" is one probe.
CREATE INDEX ops_alerts_resolved ON ops_alerts (dedup_key, created_at, id)
    WHERE kind = 'resolved';
