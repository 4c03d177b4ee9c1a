-- 027: several business numbers. A company sends from a number per market,
-- and no number goes past its own throughput limit, so past that scale it
-- has more numbers (WHATSAPP_NUMBERS, docs/design/numbers.md). Each person is
-- bound to one number, each document goes out whole from its person's
-- number, each number has its own send timeline (send_pacer was keyed by
-- number from 007 on) and its own pause: a number the platform refuses stops
-- its own sends, never the others'.

-- The number a person is bound to: set when they are added (explicitly, or by
-- the calling-code rule of WHATSAPP_NUMBERS). NULL: the default number
-- (WHATSAPP_PHONE_NUMBER_ID), which is where everybody added before numbers
-- were configured has their conversation.
ALTER TABLE people ADD COLUMN phone_number_id text;

-- The number a document went out from: written by its first claim and never
-- changed, so a document begun on one number is finished on it (the report
-- and `documents show` say which). NULL: never claimed (or claimed before 027).
ALTER TABLE documents ADD COLUMN phone_number_id text;

-- The number a knock was sent from (the person's; the report splits by it).
ALTER TABLE knocks ADD COLUMN phone_number_id text;

-- The pause, per number. The one row every migration since 001 kept becomes
-- the row of every number ('*': the token, the app, the account and the
-- portfolio, which every number shares); a number's own trouble (not
-- registered, unknown to the token, its display name) pauses its own row,
-- made when it first pauses. A send is paused when its number's row or '*'
-- is.
ALTER TABLE sender_state ADD COLUMN phone_number_id text NOT NULL DEFAULT '*';
ALTER TABLE sender_state DROP CONSTRAINT sender_state_pkey;
ALTER TABLE sender_state DROP COLUMN id;
ALTER TABLE sender_state ADD PRIMARY KEY (phone_number_id);

-- A document given back while its number (or every number) is paused is due
-- no earlier than that pause's next probe: no listener sweeps it again at once.
CREATE OR REPLACE FUNCTION notify_delivery_ready() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    due timestamptz := NEW.next_attempt_at;
BEGIN
    SELECT greatest(due, max(s.next_probe_at)) INTO due
    FROM sender_state s
    WHERE s.paused_at IS NOT NULL AND s.next_probe_at IS NOT NULL
      AND (s.phone_number_id = '*' OR s.phone_number_id = NEW.phone_number_id);
    PERFORM pg_notify(
        'delivery_ready',
        NEW.id::text || ':' || extract(epoch FROM coalesce(due, NEW.next_attempt_at))::text
    );
    RETURN NULL;
END
$$;
