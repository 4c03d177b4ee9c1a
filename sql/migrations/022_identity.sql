-- 022: a person is known by phone number, by business-scoped user id (BSUID),
-- or both. Since mid-2026 a person who uses a WhatsApp username may reach us
-- with a BSUID (`from_user_id`, `contacts[].user_id`) and no phone number at
-- all; such a person is sent to with `recipient` instead of `to`.

ALTER TABLE people
    ADD COLUMN user_id text,
    ADD COLUMN username text,
    ADD CONSTRAINT people_user_id_key UNIQUE (user_id),
    ADD CONSTRAINT people_user_id_check CHECK (user_id ~ '^[A-Z]{2}\.[A-Za-z0-9]{1,128}$');

-- Every change of a person's identifiers, and what announced it: a number or
-- a BSUID learned from a message that carried both, a number changed by the
-- platform's `user_changed_number`, a BSUID by `user_changed_user_id` or a
-- `user_id_update`. The person row is the one moved; documents, chunks and
-- inbound messages keep their person id and the address they were sent to.
CREATE TABLE person_identity_changes (
    id           bigserial PRIMARY KEY,
    person_id    bigint NOT NULL REFERENCES people (id) ON DELETE CASCADE,
    field        text NOT NULL CHECK (field IN ('phone', 'user_id')),
    old_value    text,
    new_value    text,
    cause        text NOT NULL,
    wa_message_id text,
    changed_at   timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX person_identity_changes_person ON person_identity_changes (person_id, changed_at);
