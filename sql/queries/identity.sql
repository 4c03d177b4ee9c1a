-- Identity without a phone number (sql/migrations/022): a person is found by number or by
-- business-scoped user id (BSUID), whichever a message carries, and moved, not
-- copied, when the platform says their number or BSUID changed.

-- name: person_by_identity
-- The person a message is from: by number first, else by BSUID (a message
-- that carries both and names two people is the number's).
SELECT * FROM people
WHERE phone = %(phone)s::text OR user_id = %(user_id)s::text
ORDER BY (phone = %(phone)s::text) IS TRUE DESC
LIMIT 1

-- name: person_by_user_id
-- One person by BSUID.
SELECT * FROM people WHERE user_id = %(user_id)s

-- name: set_person_user_id
-- An operator gives a person's BSUID (`people add --user-id`).
UPDATE people SET user_id = %(user_id)s WHERE id = %(person_id)s RETURNING *

-- name: learn_identity
-- A message from the person carried %(phone)s and/or %(user_id)s (and a
-- username): fill in the identifier the row lacks (never one another person
-- holds), and take a new BSUID when the message was matched by number (the
-- platform gives a person a new BSUID when their number changes). A number
-- is never replaced here: only `user_changed_number` moves it. Every change is
-- logged; the count of changes comes back.
WITH old AS (
    SELECT id, phone, user_id FROM people WHERE id = %(person_id)s FOR UPDATE
),
new AS (
    SELECT old.id,
           CASE WHEN old.phone IS NULL AND %(phone)s::text IS NOT NULL
                     AND NOT EXISTS (SELECT 1 FROM people o WHERE o.phone = %(phone)s::text)
                THEN %(phone)s::text ELSE old.phone END AS phone,
           CASE WHEN %(user_id)s::text IS NOT NULL
                     AND old.user_id IS DISTINCT FROM %(user_id)s::text
                     AND (old.user_id IS NULL OR old.phone = %(phone)s::text)
                     AND NOT EXISTS (SELECT 1 FROM people o WHERE o.user_id = %(user_id)s::text)
                THEN %(user_id)s::text ELSE old.user_id END AS user_id
    FROM old
),
moved AS (
    UPDATE people p
    SET phone = new.phone, user_id = new.user_id,
        username = coalesce(%(username)s::text, p.username)
    FROM new
    WHERE p.id = new.id
    RETURNING p.id
),
logged AS (
    INSERT INTO person_identity_changes
        (person_id, field, old_value, new_value, cause, wa_message_id)
    SELECT old.id, f.field, f.old_value, f.new_value, 'learned', %(wa_message_id)s
    FROM old
    JOIN new ON new.id = old.id
    CROSS JOIN LATERAL (VALUES ('phone', old.phone, new.phone),
                               ('user_id', old.user_id, new.user_id)) f (field, old_value, new_value)
    WHERE f.old_value IS DISTINCT FROM f.new_value
    RETURNING 1
)
SELECT count(*)::int FROM logged

-- name: change_number
-- The platform says the person's number changed (`user_changed_number`): the
-- person row takes the new number (their documents, chunks and messages stay
-- theirs, as they were sent). No row back: no such person, already moved, or
-- the new number belongs to another person (left alone, for an operator).
WITH old AS (
    SELECT id, phone FROM people WHERE id = %(person_id)s FOR UPDATE
),
moved AS (
    UPDATE people p SET phone = %(new_phone)s
    FROM old
    WHERE p.id = old.id AND p.phone IS DISTINCT FROM %(new_phone)s
      AND NOT EXISTS (SELECT 1 FROM people o WHERE o.phone = %(new_phone)s AND o.id <> old.id)
    RETURNING p.id, old.phone AS old_phone
)
INSERT INTO person_identity_changes (person_id, field, old_value, new_value, cause, wa_message_id)
SELECT id, 'phone', old_phone, %(new_phone)s, %(cause)s, %(wa_message_id)s FROM moved
RETURNING person_id

-- name: change_user_id
-- The platform replaced a BSUID (`user_changed_user_id`, `user_id_update`):
-- the person who had %(old_user_id)s (else the person with number %(phone)s,
-- when we never knew the old one) now has %(new_user_id)s. No row back: nobody
-- to move, or the new BSUID is another person's already.
WITH old AS (
    SELECT id, user_id FROM people
    WHERE user_id = %(old_user_id)s::text OR phone = %(phone)s::text
    ORDER BY (user_id = %(old_user_id)s::text) IS TRUE DESC, id
    LIMIT 1
    FOR UPDATE
),
moved AS (
    UPDATE people p SET user_id = %(new_user_id)s
    FROM old
    WHERE p.id = old.id AND p.user_id IS DISTINCT FROM %(new_user_id)s
      AND NOT EXISTS (SELECT 1 FROM people o WHERE o.user_id = %(new_user_id)s)
    RETURNING p.id, old.user_id AS old_user_id
)
INSERT INTO person_identity_changes (person_id, field, old_value, new_value, cause, wa_message_id)
SELECT id, 'user_id', old_user_id, %(new_user_id)s, %(cause)s, %(wa_message_id)s FROM moved
RETURNING person_id

-- name: identity_changes
-- A person's identity history, oldest first.
SELECT field, old_value, new_value, cause, wa_message_id, changed_at
FROM person_identity_changes WHERE person_id = %(person_id)s ORDER BY changed_at, id
