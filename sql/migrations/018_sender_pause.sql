-- 018: a pause that pauses. A sender-wide error (a bad token, an unknown phone
-- number id, a locked account, a cut messaging limit, the app's rate limit)
-- stops every sender of the fleet: the pause is read before claiming and at
-- every fence, and while it lasts one sender at a time probes whether the
-- cause has cleared, at a growing interval (docs/design/pause.md).
ALTER TABLE sender_state
    ADD COLUMN next_probe_at timestamptz,
    -- the interval after the next failed probe grows from this one
    ADD COLUMN probe_interval_seconds double precision,
    -- the sweep that holds the probe, and the one document it may send
    ADD COLUMN probe_token uuid,
    ADD COLUMN probe_document_id bigint,
    ADD COLUMN probe_started_at timestamptz,
    ADD COLUMN probes integer NOT NULL DEFAULT 0,
    -- sends the platform refused with a sender-wide error during this pause
    ADD COLUMN refused_sends integer NOT NULL DEFAULT 0,
    ADD COLUMN resumed_by text;

-- While sending is paused a document becomes deliverable no earlier than the
-- next probe: a claim given back says so, and no listener sweeps it again at
-- once (012's notification carried its own due time, now).
CREATE OR REPLACE FUNCTION notify_delivery_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := NEW.next_attempt_at;
BEGIN
    SELECT greatest(due, s.next_probe_at) INTO due
    FROM sender_state s WHERE s.paused_at IS NOT NULL AND s.next_probe_at IS NOT NULL;
    PERFORM pg_notify(
        'delivery_ready',
        NEW.id::text || ':' || extract(epoch FROM coalesce(due, NEW.next_attempt_at))::text
    );
    RETURN NULL;
END
$$;
