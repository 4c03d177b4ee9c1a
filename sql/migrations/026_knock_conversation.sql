-- 026: the knock as a conversation. A knock carries quick-reply buttons
-- (Send it / Later / Stop) and the reply is read for what it asks; a knock
-- covers every document of the person that waits; a knock delivered and not
-- answered gets one reminder, then its documents are abandoned `no_reply`.
--
-- Until now any reply meant "send it", there was no way to say "not now" or
-- "never", and somebody who ignored the knock left their documents waiting on
-- them forever, indistinguishable from somebody who never saw it.

-- The person pressed Stop (or wrote STOP, PARAR, BAJA, …): no knock and no daily
-- brief goes to them until they write START (VOLVER, VOLTAR). Apart from the
-- platform's own opt-out (opted_out_at, 131050): a person who stopped our
-- knocks may still ask for a document while they write to us.
ALTER TABLE people ADD COLUMN knocks_stopped_at timestamptz;

-- Each reply that asked for something (a button, or a keyword), once per
-- inbound message: what was asked, which knock it answered (context.id, else
-- the person's latest knock), and for Later until when. The report counts
-- the presses; a redelivered webhook adds nothing.
CREATE TABLE knock_replies (
    id                 bigserial PRIMARY KEY,
    inbound_message_id text NOT NULL UNIQUE,
    person_id          bigint NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    knock_id           bigint REFERENCES knocks (id) ON DELETE SET NULL,
    action             text NOT NULL CHECK (action IN ('send', 'later', 'stop', 'start')),
    via                text NOT NULL CHECK (via IN ('button', 'keyword')),
    at                 timestamptz NOT NULL DEFAULT now(),
    snoozed_until      timestamptz,
    documents          integer NOT NULL DEFAULT 0  -- delivered now, snoozed or abandoned by it
);
CREATE INDEX knock_replies_at ON knock_replies (at);
CREATE INDEX knock_replies_knock ON knock_replies (knock_id) WHERE knock_id IS NOT NULL;

-- A reminder is a knock of its own; the first knock of a document is not.
ALTER TABLE knocks ADD COLUMN reminder boolean NOT NULL DEFAULT false;

-- A document whose knock was delivered and not answered is reminded once:
-- when (the first knock's time + 24 h, the per-person rule) and whether the
-- reminder went (then the next wait ends in `no_reply`).
ALTER TABLE documents ADD COLUMN remind_at timestamptz;
ALTER TABLE documents ADD COLUMN reminded_at timestamptz;
-- The heartbeat looks for both every tick: documents waiting and not reminded
-- yet (few: people knocked in about the last day), and reminded ones by when.
CREATE INDEX documents_awaiting_unreminded ON documents (person_id)
    WHERE awaiting_reply_since IS NOT NULL AND reminded_at IS NULL;
CREATE INDEX documents_reminded ON documents (reminded_at)
    WHERE awaiting_reply_since IS NOT NULL AND reminded_at IS NOT NULL;

ALTER TABLE documents DROP CONSTRAINT documents_abandon_reason_check;
ALTER TABLE documents ADD CONSTRAINT documents_abandon_reason_check CHECK (abandon_reason IN (
    'stale', 'undeliverable', 'opted_out', 'max_attempts', 'unknown_outcome', 'unreachable',
    'operator', 'rejected', 'superseded', 'cancelled',
    'no_reply'  -- knocked, reminded, and the person never answered
));

-- The person's next morning after %(at)s: the end of their quiet hours
-- (their own or the default) after that instant, in their time zone, or the
-- next 08:00 when quiet hours are off. "Later" snoozes until then.
CREATE FUNCTION next_morning(at timestamptz, time_zone text, quiet_hours text)
RETURNS timestamptz
LANGUAGE sql STABLE AS $$
    WITH w AS (
        SELECT (at AT TIME ZONE time_zone) AS local_now,
               CASE WHEN quiet_hours IS NULL OR quiet_hours = ''
                         OR split_part(quiet_hours, '-', 1) = split_part(quiet_hours, '-', 2)
                    THEN time '08:00'
                    ELSE split_part(quiet_hours, '-', 2)::time END AS ends
    )
    SELECT CASE WHEN w.local_now::time < w.ends
                THEN (w.local_now::date + w.ends) AT TIME ZONE time_zone
                ELSE (w.local_now::date + 1 + w.ends) AT TIME ZONE time_zone END
    FROM w
$$;
