-- 023: what each message cost. Since 2025-07 the platform prices every
-- message (PMP), and says how in the `pricing` object of its statuses
-- (billable, pricing_model, category, type). It is kept here once per message,
-- from the first status that carries it (`sent`; `delivered` carries the same
-- object and may arrive first), with what the message was for (its callback
-- tag: a chunk or a knock of a document) and the country it went to (a
-- BSUID names it, a number's calling code else), which the rate table prices.
CREATE TABLE message_pricing (
    wa_message_id text PRIMARY KEY,
    document_id   bigint,
    part          text NOT NULL CHECK (part IN ('chunk', 'knock', 'other')),
    chunk_index   integer,
    country       text,
    billable      boolean,
    category      text,
    pricing_model text,
    pricing_type  text,
    priced_at     timestamptz NOT NULL,
    recorded_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX message_pricing_priced_at ON message_pricing (priced_at);
CREATE INDEX message_pricing_document ON message_pricing (document_id) WHERE document_id IS NOT NULL;
