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

-- The eligibility definition, restated (supersedes 016): a person is
-- unreachable only with neither a number nor a BSUID (or opted out);
-- everything else as in 016.
CREATE OR REPLACE FUNCTION eligible_documents(lease interval, service_window interval,
                                              quiet_default text)
RETURNS TABLE (id bigint, person_id bigint, kind text, next_attempt_at timestamptz,
               action text, quiet_until timestamptz)
LANGUAGE sql STABLE AS $$
    SELECT d.id, d.person_id, d.kind, d.next_attempt_at,
           CASE
               WHEN (p.phone IS NULL AND p.user_id IS NULL) OR p.opted_out_at IS NOT NULL
                    THEN 'abandon_unreachable'
               WHEN d.kind = 'daily_brief'
                    AND d.for_date < (now() AT TIME ZONE p.time_zone)::date THEN 'abandon_stale'
               WHEN q.until IS NOT NULL THEN 'hold_quiet'
               WHEN p.last_inbound_at > now() - service_window
                    AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity') THEN 'deliver'
               ELSE 'knock'
           END,
           q.until
    FROM documents d
    JOIN people p ON p.id = d.person_id
    CROSS JOIN LATERAL (
        SELECT CASE
            WHEN p.last_inbound_at > now() - interval '15 minutes' THEN NULL
            WHEN d.kind = 'daily_brief'
                 AND in_brief_hour(now(), p.time_zone, d.for_date, p.brief_local_time)
                 THEN NULL
            ELSE quiet_until(now(), p.time_zone, coalesce(p.quiet_hours, quiet_default))
        END AS until
    ) q
    WHERE d.in_queue
      AND d.next_attempt_at <= now()
      AND (d.claim_token IS NULL OR d.claimed_at < now() - lease)
      -- Its person's turn (007): no older document of theirs waits in the
      -- queue, and no other of theirs is being sent.
      AND NOT EXISTS (
          SELECT 1 FROM documents o
          WHERE o.person_id = d.person_id AND o.in_queue AND o.id <> d.id
            AND ((o.generated_at, o.id) < (d.generated_at, d.id)
                 OR (o.claim_token IS NOT NULL AND o.claimed_at >= now() - lease))
      )
$$;
