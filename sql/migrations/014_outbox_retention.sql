-- 014: the outbox forgets what Dagster has recorded. A delivery_events row
-- buffers a transition until it is on the delivered_documents timeline; once
-- reported, Dagster's event log is the record and the row is history nobody
-- reads. The record_delivery_events sensor deletes rows reported longer ago
-- than the outbox keeps them (watch/delivery_events.py, OUTBOX_KEEP), a
-- bounded batch per tick; this index makes "anything to forget?" one probe
-- however long the history.

CREATE INDEX delivery_events_reported ON delivery_events (reported_at)
    WHERE reported_at IS NOT NULL;
