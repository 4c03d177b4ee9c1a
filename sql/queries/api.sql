-- The applications' door (sql/migrations/036): hand-overs under an idempotency
-- key, the people an application knows by its own key, what it may read of a
-- document, each token's rate, and the outbox of events back to each
-- application (store/handover.py, store/application_people.py,
-- store/application_documents.py, store/application_events.py).

-- name: api_idempotency_lock
-- Serialise the hand-overs of one application under one idempotency key, for the transaction: a second waits, then finds the first's document.
SELECT pg_advisory_xact_lock(hashtextextended(%(application)s || chr(31) || %(idempotency_key)s, 4236))

-- name: api_handed_over
-- The document an application handed over under an idempotency key, with the request's hash and the first answer.
SELECT document_id, request_hash, answer
FROM api_documents
WHERE application = %(application)s AND idempotency_key = %(idempotency_key)s

-- name: api_insert_document
-- Record who handed a document over, under which keys, with what.
INSERT INTO api_documents (document_id, application, idempotency_key, request_hash, replace_key,
                           priority, metadata)
VALUES (%(document_id)s, %(application)s, %(idempotency_key)s, %(request_hash)s,
        %(replace_key)s, %(priority)s, %(metadata)s)

-- name: api_keep_answer
-- Keep the first answer to a hand-over, replayed to a retry under the same key.
UPDATE api_documents SET answer = %(answer)s WHERE document_id = %(document_id)s

-- name: api_person_lock
-- Serialise the changes of one application to one person key, for the transaction.
SELECT pg_advisory_xact_lock(hashtextextended(%(application)s || chr(31) || %(user_key)s, 4237))

-- name: api_person_by_key
-- The person an application knows by its own key.
SELECT p.*
FROM api_people a JOIN people p ON p.id = a.person_id
WHERE a.application = %(application)s AND a.user_key = %(user_key)s

-- name: api_link_person
-- The application knows this person (under its key, when given); answers the key it knows them by, the one it had if it had one.
INSERT INTO api_people (application, person_id, user_key)
VALUES (%(application)s, %(person_id)s, %(user_key)s)
ON CONFLICT (application, person_id)
DO UPDATE SET user_key = coalesce(api_people.user_key, EXCLUDED.user_key)
RETURNING user_key

-- name: api_person_key
-- The key an application knows a person by (NULL: known, without a key), if it knows them.
SELECT user_key FROM api_people WHERE application = %(application)s AND person_id = %(person_id)s

-- name: api_update_person
-- Change what an application says of a person: each value given replaces the stored one (quiet hours only when quiet_hours_given: NULL is the deployment's default); a number or a user id only where the person has none.
UPDATE people
SET name = coalesce(%(name)s, name),
    locale = coalesce(%(locale)s, locale),
    time_zone = coalesce(%(time_zone)s, time_zone),
    brief_opt_in = coalesce(%(brief_opt_in)s, brief_opt_in),
    brief_local_time = coalesce(%(brief_local_time)s, brief_local_time),
    quiet_hours = CASE WHEN %(quiet_hours_given)s THEN %(quiet_hours)s ELSE quiet_hours END,
    phone = coalesce(phone, %(phone)s),
    user_id = coalesce(user_id, %(user_id)s)
WHERE id = %(person_id)s
RETURNING *

-- name: api_document
-- A document as the application that handed it over reads it (no row for another's): its state and since when, the person as the application knows them, what it handed over with it, the way it goes or went (sql/migrations/039).
SELECT d.id, d.person_id, k.user_key AS person_key, d.kind, d.for_date, s.state, s.since,
       d.abandon_reason, d.status, d.created_at, d.generated_at, d.review_decision, d.reviewed_at,
       d.knock_sent_at, d.awaiting_reply_since, d.quiet_until, d.delivered_at, d.abandoned_at,
       d.delivery_attempts, d.last_delivery_error, d.next_attempt_at,
       d.claim_token IS NOT NULL AND d.claimed_at >= now() - %(lease)s AS in_flight,
       a.idempotency_key, a.replace_key, a.priority, a.metadata, a.created_at AS handed_over_at,
       coalesce(d.way, CASE WHEN d.delivered_at IS NOT NULL AND d.knock_sent_at IS NULL THEN 'parts'
                            WHEN d.delivered_at IS NOT NULL THEN 'knock_then_parts' END) AS way
FROM api_documents a
JOIN documents d ON d.id = a.document_id
JOIN document_states s ON s.id = a.document_id
LEFT JOIN api_people k ON k.application = a.application AND k.person_id = d.person_id
WHERE a.document_id = %(document_id)s AND a.application = %(application)s

-- name: api_document_knocks
-- The knocks sent for a document, oldest first.
SELECT k.id, k.template, k.language, k.state, k.reminder, k.sent_at, k.delivered_at, k.read_at,
       k.failed_at, k.error_code
FROM knock_documents kd JOIN knocks k ON k.id = kd.knock_id
WHERE kd.document_id = %(document_id)s
ORDER BY k.id

-- name: api_document_pricing
-- How the platform priced each message of a document (its parts and its knocks).
SELECT part, chunk_index, category, billable, country
FROM message_pricing
WHERE document_id = %(document_id)s
ORDER BY priced_at, wa_message_id

-- name: api_rate_take
-- Take one request from a token's rate (GCRA, the theoretical arrival time kept in Postgres for every replica): a row when allowed, none when the token must wait.
INSERT INTO api_rate_limits AS r (bucket, tat)
VALUES (%(bucket)s, now() + %(interval)s)
ON CONFLICT (bucket) DO UPDATE
SET tat = greatest(r.tat, now()) + %(interval)s
WHERE greatest(r.tat, now()) + %(interval)s - %(burst)s * %(interval)s <= now()
RETURNING tat

-- name: api_rate_wait
-- How long a token that was refused must wait before its next request is allowed, in seconds.
SELECT greatest(extract(epoch FROM greatest(tat, now()) + %(interval)s
                                    - %(burst)s * %(interval)s - now()), 0)::float8
FROM api_rate_limits WHERE bucket = %(bucket)s

-- name: api_register_endpoint
-- A service started with this application's endpoint: its events are recorded from now on.
INSERT INTO api_endpoints (application) VALUES (%(application)s)
ON CONFLICT (application) DO UPDATE SET removed_at = NULL
WHERE api_endpoints.removed_at IS NOT NULL

-- name: api_unregister_endpoints
-- A service started without these applications' endpoints: record no more events for them (those waiting stay, until the horizon).
UPDATE api_endpoints SET removed_at = now()
WHERE removed_at IS NULL AND NOT (application = ANY(%(applications)s))

-- name: api_endpoint_gate
-- May this process send to an application's endpoint now? A healthy one (no failure since its last success): yes, as every process may (false: not probing; nothing written). A failing one: only the process that takes its probe, due now and then held for the lease (true: probing, one event). No row: not now.
WITH endpoint AS (
    SELECT application, failures FROM api_endpoints
    WHERE application = %(application)s AND removed_at IS NULL
),
probe AS (
    UPDATE api_endpoints e SET next_attempt_at = now() + %(lease)s
    FROM endpoint
    WHERE e.application = endpoint.application AND endpoint.failures > 0
      AND e.failures > 0 AND e.next_attempt_at <= now()
    RETURNING true AS probing
)
SELECT probing FROM probe
UNION ALL
SELECT false FROM endpoint WHERE failures = 0

-- name: api_listen_events
-- Hear when an event is recorded (a trigger on api_events notifies, once per statement).
LISTEN api_events

-- name: api_endpoint_probe_unused
-- The probe found nothing to send: the failing endpoint may be probed as soon as an event comes.
UPDATE api_endpoints SET next_attempt_at = now()
WHERE application = %(application)s AND failures > 0

-- name: api_claim_events
-- Claim the oldest unsent event of each of an application's streams (a document, a person): none behind an earlier unsent one, so a stream goes out in order; due (a probe takes the oldest, due or not); not held by another process's live claim. SKIP LOCKED shares the heads between processes.
WITH heads AS (
    SELECT e.id
    FROM api_events e
    WHERE e.application = %(application)s
      AND e.delivered_at IS NULL AND e.expired_at IS NULL
      AND (%(probing)s OR e.next_attempt_at <= now())
      AND (e.claimed_by IS NULL OR e.claimed_at < now() - %(lease)s)
      AND NOT EXISTS (
          SELECT 1 FROM api_events o
          WHERE o.stream = e.stream AND o.id < e.id
            AND o.delivered_at IS NULL AND o.expired_at IS NULL)
    ORDER BY e.id
    LIMIT %(limit)s
    FOR UPDATE OF e SKIP LOCKED
)
UPDATE api_events e
SET claimed_by = %(token)s, claimed_at = now()
FROM heads
WHERE e.id = heads.id
  AND e.delivered_at IS NULL AND e.expired_at IS NULL
  AND (e.claimed_by IS NULL OR e.claimed_at < now() - %(lease)s)
RETURNING e.id, e.event_id, e.type, e.data, e.created_at, e.attempts

-- name: api_events_delivered
-- The endpoint took these events (a 2xx): delivered, whoever held them since (a fact; a second copy may still be on its way, as at-least-once allows).
UPDATE api_events
SET delivered_at = now(), attempts = attempts + 1, claimed_by = NULL, claimed_at = NULL,
    last_error = NULL
WHERE id = ANY(%(ids)s) AND delivered_at IS NULL AND expired_at IS NULL

-- name: api_event_failed
-- The endpoint did not take this event: try it again in %(delay_seconds)s, if our claim still holds.
UPDATE api_events
SET attempts = attempts + 1, last_error = left(%(error)s, 500),
    next_attempt_at = now() + make_interval(secs => %(delay_seconds)s),
    claimed_by = NULL, claimed_at = NULL
WHERE id = %(id)s AND claimed_by = %(token)s AND delivered_at IS NULL

-- name: api_endpoint_ok
-- The endpoint answered: healthy again (a failing one: every event waiting for it is due now). Answers how many events were made due.
WITH healed AS (
    UPDATE api_endpoints
    SET failures = 0, failing_since = NULL, next_attempt_at = now(), last_error = NULL,
        last_success_at = now()
    WHERE application = %(application)s
    RETURNING application
),
due AS (
    UPDATE api_events e SET next_attempt_at = now()
    FROM healed
    WHERE e.application = healed.application AND e.delivered_at IS NULL
      AND e.expired_at IS NULL AND e.next_attempt_at > now()
    RETURNING e.id
)
SELECT count(*)::integer FROM due

-- name: api_endpoint_failed
-- The endpoint could not be reached or failed (5xx, timeout): one more failure in a row, the next probe after the schedule's delay for that many (%(schedule)s, seconds; its last entry repeats).
UPDATE api_endpoints
SET failures = failures + 1, failing_since = coalesce(failing_since, now()),
    last_error = left(%(error)s, 500),
    next_attempt_at = now() + make_interval(
        secs => (%(schedule)s::float8[])[least(failures + 1, cardinality(%(schedule)s::float8[]))])
WHERE application = %(application)s
RETURNING failures

-- name: api_expire_events
-- Give up the events not delivered within the retry horizon (oldest first, a batch): named by application, for the alert.
UPDATE api_events e
SET expired_at = now(), claimed_by = NULL, claimed_at = NULL
WHERE e.id IN (
    SELECT id FROM api_events
    WHERE delivered_at IS NULL AND expired_at IS NULL AND created_at < now() - %(horizon)s
    ORDER BY id
    LIMIT %(limit)s
    FOR UPDATE SKIP LOCKED)
RETURNING e.application

-- name: api_forget_events
-- Delete the oldest events delivered or given up more than %(keep)s ago, a batch.
DELETE FROM api_events
WHERE id IN (
    SELECT id FROM api_events
    WHERE (delivered_at IS NOT NULL OR expired_at IS NOT NULL)
      AND coalesce(delivered_at, expired_at) < now() - %(keep)s
    ORDER BY coalesce(delivered_at, expired_at)
    LIMIT %(limit)s)

-- name: api_outbox_state
-- Each application's outbox: its endpoint as the fleet knows it, the events waiting and the oldest's age, and the events given up in the last day.
SELECT e.application, e.registered_at, e.removed_at, e.failing_since, e.failures,
       e.next_attempt_at, e.last_error, e.last_success_at,
       coalesce(w.waiting, 0) AS waiting, w.oldest_age_seconds,
       coalesce(x.expired, 0) AS expired_last_day
FROM api_endpoints e
LEFT JOIN LATERAL (
    SELECT count(*)::integer AS waiting,
           extract(epoch FROM now() - min(v.created_at))::float8 AS oldest_age_seconds
    FROM api_events v
    WHERE v.application = e.application AND v.delivered_at IS NULL AND v.expired_at IS NULL
) w ON true
LEFT JOIN LATERAL (
    SELECT count(*)::integer AS expired
    FROM api_events v
    WHERE v.application = e.application AND v.expired_at IS NOT NULL
      AND (v.delivered_at IS NOT NULL OR v.expired_at IS NOT NULL)
      AND coalesce(v.delivered_at, v.expired_at) > now() - interval '1 day'
) x ON true
ORDER BY e.application

-- name: api_handovers
-- What each application handed over in the last 24 hours: how many, and where they are now.
SELECT a.application, count(*)::integer AS handed_over,
       count(*) FILTER (WHERE s.state = 'delivered')::integer AS delivered,
       count(*) FILTER (WHERE s.state = 'abandoned')::integer AS abandoned,
       count(*) FILTER (WHERE s.state NOT IN ('delivered', 'abandoned', 'generation_failed'))::integer
           AS open
FROM api_documents a JOIN document_states s ON s.id = a.document_id
WHERE a.created_at > now() - interval '24 hours'
GROUP BY a.application
ORDER BY a.application
