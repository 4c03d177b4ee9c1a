-- 028: a document's finish sees a failure applied while it ran, without
-- locking the chunks it already sent.
--
-- The sender marks a document delivered in the statement that records its last
-- chunk (advance_delivery). A failed status for an earlier chunk may be applied
-- by the service at the same moment. The finish's check over the chunks reads
-- its statement's snapshot, so a failure committed while the finish waited for
-- the document row would be missed. Locking every earlier chunk FOR SHARE at
-- the finish closed that, at the price of one tuple lock (a heap write and its
-- WAL record) per earlier chunk of every document.
--
-- Every failed status the service applies also updates the document row in the
-- same transaction (undeliver_document), so a counter there is enough: the
-- finish waits for that row anyway, and once it has waited it re-checks its
-- conditions on the row's new version, where the counter has moved.
ALTER TABLE documents ADD COLUMN chunk_failures integer NOT NULL DEFAULT 0;
COMMENT ON COLUMN documents.chunk_failures IS
    'failed statuses applied to this document''s chunks; the finish of a pass compares it with the value it read';
