-- 038: a press of Later or Stop is answered.
--
-- A person who pressed Later or Stop (or wrote it) heard nothing back, and
-- could not tell whether it had worked. Each such reply now owes one short
-- message in their language: when Later brings their documents, or that Stop
-- stopped them and how to come back (delivery/reply.py). Their window is open
-- (they just wrote), so it is free-form text, no template.
--
-- Owed in the reply's own transaction, once per reply (the primary key): a
-- redelivered webhook, or the same one applied by another replica, stores no
-- second inbound message and so owes nothing more. A sweep sends it through
-- the engine's send path (delivery/acknowledgement.py): `claim_acknowledgements`
-- is its fence (due → sending, one sender takes it, none while its number is
-- paused), the number's shared pacer spaces it, and its message id is kept.
-- At most once: a send whose outcome is unknown is never repeated. Owed for a
-- few minutes only (expires_at): late, it would answer a question nobody is
-- asking any more.
CREATE TABLE acknowledgements (
    reply_id        bigint PRIMARY KEY REFERENCES knock_replies (id) ON DELETE CASCADE,
    -- The number it goes from: the one the person wrote to when that is not
    -- theirs (a Stop sent to another of our numbers); NULL: their own.
    phone_number_id text,
    state           text NOT NULL DEFAULT 'due'
                    CHECK (state IN ('due', 'sending', 'sent', 'unknown', 'failed')),
    due_at          timestamptz NOT NULL DEFAULT now(),
    expires_at      timestamptz NOT NULL,
    attempts        integer NOT NULL DEFAULT 0,
    claimed_at      timestamptz,
    wa_message_id   text,
    sent_at         timestamptz,
    error_code      integer,
    error           text
);
CREATE INDEX acknowledgements_due ON acknowledgements (due_at) WHERE state = 'due';
