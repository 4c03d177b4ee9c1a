-- Documents as an operator reads them (`documents show`, `documents list`, the
-- answers of `documents add` and `resend`): the state of the document_states
-- view first, then what it waits on and until when: the facts the explanation
-- is made of (watch/outlook.py), read in one statement.

-- name: document_outlooks
-- The documents of %(ids)s (NULL: any), in %(state)s, of person %(person_id)s, of %(kind)s, created since %(since)s (each NULL: any), newest first, at most %(limit)s: each one's state and since, its person, and why it waits: its retry, claim (live within %(lease)s), the person's window (%(service_window)s) and quiet hours (theirs, else %(quiet_default)s; a person who wrote in the last 15 minutes is not quiet, as eligible_documents says), the pause of its sender, its knock and reply, whether a newer document supersedes it, its parts, the way it goes or went (a file: on which document template).
SELECT d.id, d.person_id, coalesce(p.name, '') AS person_name,
       coalesce(p.phone, p.user_id) AS person_address, p.time_zone,
       coalesce(p.quiet_hours, %(quiet_default)s::text) AS quiet_hours,
       d.kind, d.for_date, d.created_at, s.state, s.since, d.abandon_reason, d.status,
       d.generation_attempts, d.generation_error, d.next_generation_at,
       d.delivery_attempts, d.last_delivery_error, d.next_attempt_at,
       (d.claim_token IS NOT NULL AND d.claimed_at >= now() - %(lease)s::interval) AS in_flight,
       d.quiet_until,
       CASE WHEN d.in_queue AND NOT coalesce(p.last_inbound_at > now() - interval '15 minutes', false)
            THEN quiet_until(now(), p.time_zone, coalesce(p.quiet_hours, %(quiet_default)s::text))
       END AS quiet_now_until,
       coalesce(p.last_inbound_at > now() - %(service_window)s::interval
                AND p.last_inbound_at >= coalesce(p.window_refused_at, '-infinity'), false)
           AS window_open,
       d.knock_sent_at, d.remind_at, d.reminded_at, d.knock_held_since,
       (SELECT min(k.expires_at) FROM knock_documents kd JOIN knocks k ON k.id = kd.knock_id
        WHERE d.awaiting_reply_since IS NOT NULL AND kd.document_id = d.id
          AND k.expires_at IS NOT NULL AND k.delivered_at IS NULL AND k.read_at IS NULL
          AND k.failed_at IS NULL AND k.expired_at IS NULL) AS knock_expires_at,
       d.awaiting_review_since, d.delivered_at, d.abandoned_at,
       pause.phone_number_id AS paused_number, pause.pause_code, pause.pause_reason,
       pause.next_probe_at,
       (SELECT min(n.id) FROM documents n
        WHERE d.in_queue AND superseded(d)
          AND n.person_id = d.person_id AND n.kind = d.kind
          AND n.for_date IS NOT DISTINCT FROM d.for_date AND n.id > d.id
          AND n.status = 'succeeded' AND n.abandoned_at IS NULL
          AND n.awaiting_review_since IS NULL) AS superseded_by,
       (SELECT count(*) FROM delivery_chunks c WHERE c.document_id = d.id)::int AS parts,
       (SELECT count(*) FROM delivery_chunks c
        WHERE c.document_id = d.id AND c.state IN ('sent', 'unknown'))::int AS parts_sent,
       now() AS now,
       -- The way it goes or went (sql/migrations/039); one delivered before 039, by its knock.
       coalesce(d.way, CASE WHEN d.delivered_at IS NOT NULL AND d.knock_sent_at IS NULL THEN 'parts'
                            WHEN d.delivered_at IS NOT NULL THEN 'knock_then_parts' END) AS way,
       d.file_template, d.file_template_language
FROM documents d
JOIN document_states s ON s.id = d.id
JOIN people p ON p.id = d.person_id
LEFT JOIN LATERAL (
    SELECT ss.phone_number_id, ss.pause_code, ss.pause_reason, ss.next_probe_at
    FROM sender_state ss
    WHERE ss.paused_at IS NOT NULL
      AND (ss.phone_number_id = '*'
           OR ss.phone_number_id = coalesce(d.phone_number_id, p.phone_number_id,
                                            %(default_number)s::text))
    ORDER BY ss.phone_number_id = '*' DESC
    LIMIT 1
) pause ON d.in_queue
WHERE (%(ids)s::bigint[] IS NULL OR d.id = ANY (%(ids)s::bigint[]))
  AND (%(state)s::text IS NULL OR s.state = %(state)s::text)
  AND (%(person_id)s::bigint IS NULL OR d.person_id = %(person_id)s::bigint)
  AND (%(kind)s::text IS NULL OR d.kind = %(kind)s::text)
  AND (%(since)s::timestamptz IS NULL OR d.created_at >= %(since)s::timestamptz)
ORDER BY d.id DESC
LIMIT %(limit)s

-- name: superseded_by
-- The documents of the person that %(id)s supersedes: not begun, of its kind and day, and not sent yet (they are abandoned superseded at their next claim).
SELECT o.id
FROM documents d
JOIN documents o ON o.person_id = d.person_id AND o.kind = d.kind
                AND o.for_date IS NOT DISTINCT FROM d.for_date AND o.id < d.id
WHERE d.id = %(id)s AND o.in_queue AND superseded(o)
ORDER BY o.id
