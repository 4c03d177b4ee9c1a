-- 033: which of our business numbers an inbound message was written to.
--
-- WhatsApp's customer service window is a pair's: a person who writes to one
-- number opens that number's window with them, not the others'. The webhook
-- names the number in its change's metadata; a message to another of our
-- numbers than the person's is stored, applies what it says of their consent
-- (Stop, Start), and opens nothing (service/ingest.py).
ALTER TABLE inbound_messages ADD COLUMN to_phone_number_id text;
COMMENT ON COLUMN inbound_messages.to_phone_number_id IS
    'the business number written to (the webhook''s metadata.phone_number_id); NULL: not named';
