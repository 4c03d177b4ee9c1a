-- 012: a document that becomes deliverable says so (NOTIFY delivery_ready), so
-- the webhook service sweeps it within a second whatever made it ready
-- (generated, approved, woken by a reply, released after a backoff or after
-- quiet hours) — poke or no poke. The payload is the document id and the
-- epoch second it is due; a listener that sees a future due time sets a timer.
--
-- The WHEN clauses keep the cost off every other update of a document (a
-- claim, a fence, a delivery): the function runs only when a document enters
-- the queue unclaimed, or its due time changes while it is there.
CREATE FUNCTION notify_delivery_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify(
        'delivery_ready',
        NEW.id::text || ':' || extract(epoch FROM NEW.next_attempt_at)::text
    );
    RETURN NULL;
END
$$;

CREATE TRIGGER documents_ready_on_insert
    AFTER INSERT ON documents
    FOR EACH ROW WHEN (NEW.in_queue AND NEW.claim_token IS NULL)
    EXECUTE FUNCTION notify_delivery_ready();

CREATE TRIGGER documents_ready_on_update
    AFTER UPDATE ON documents
    FOR EACH ROW WHEN (
        NEW.in_queue AND NEW.claim_token IS NULL
        AND (NOT OLD.in_queue
             OR OLD.claim_token IS NOT NULL
             OR OLD.next_attempt_at IS DISTINCT FROM NEW.next_attempt_at)
    )
    EXECUTE FUNCTION notify_delivery_ready();
