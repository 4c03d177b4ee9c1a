-- 040: a person who writes sees us answer; a template the platform dropped ends.
--
-- Read marks. When a person's message is what sets a delivery going, its
-- first part is preceded by a read mark with the typing indicator
-- (delivery/document.py). `read_marked_at` is taken by one sender in one
-- statement, so a fleet marks each message at most once, whoever delivers.
ALTER TABLE inbound_messages ADD COLUMN read_marked_at timestamptz;
COMMENT ON COLUMN inbound_messages.read_marked_at IS
    'when a sender marked it read (with the typing indicator) before a delivery it set going';

-- Deadlines. A template may be created with a time to live
-- (message_send_ttl_seconds); the platform drops a message not delivered
-- within it and promises no `failed` status. Each template message we send
-- records, when it is sent, the moment the platform gives up on it
-- (`expires_at`: sent + the template's time to live, DELIVERY_TEMPLATE_TTLS).
-- No `delivered` or `read` by then (and a grace for late statuses): the
-- message is taken as dropped (`expired_at`), and the documents that waited on
-- it end: a brief `expired` (abandoned, never sent again), anything else to its
-- one reminder (sql/026).
ALTER TABLE knocks ADD COLUMN expires_at timestamptz;
ALTER TABLE knocks ADD COLUMN expired_at timestamptz;
COMMENT ON COLUMN knocks.expires_at IS
    'when the platform drops it if not delivered: sent + the template''s time to live';
COMMENT ON COLUMN knocks.expired_at IS
    'when we took it as dropped: its deadline passed with no delivered, read or failed status';
-- The sweep looks for knocks past their deadline every pass: only the ones
-- still waiting for a status are in the index.
CREATE INDEX knocks_awaiting_delivery ON knocks (expires_at)
    WHERE expires_at IS NOT NULL AND delivered_at IS NULL AND read_at IS NULL
      AND failed_at IS NULL AND expired_at IS NULL;

-- The same for a document's own template message (a file on a document
-- template: one row of delivery_chunks): its deadline on its ledger row. The
-- index holds only such rows (a text part never has a deadline), so a part's
-- statuses stay heap-only updates.
ALTER TABLE delivery_chunks ADD COLUMN expires_at timestamptz;
ALTER TABLE delivery_chunks ADD COLUMN expired_at timestamptz;
COMMENT ON COLUMN delivery_chunks.expires_at IS
    'a template message (a file on a document template): when the platform drops it undelivered';
CREATE INDEX delivery_chunks_deadline ON delivery_chunks (expires_at)
    WHERE expires_at IS NOT NULL AND expired_at IS NULL;

ALTER TABLE documents DROP CONSTRAINT documents_abandon_reason_check;
ALTER TABLE documents ADD CONSTRAINT documents_abandon_reason_check CHECK (abandon_reason IN (
    'stale', 'undeliverable', 'opted_out', 'max_attempts', 'unknown_outcome', 'unreachable',
    'operator', 'rejected', 'superseded', 'cancelled', 'no_reply',
    'expired'  -- a brief whose template message the platform dropped at its time to live
));
