-- 044: what counts as a knock delivered and as a knock answered, in one place.
-- The knocks' health check (queries/checks.sql) and the daily report
-- (queries/report.sql) each spelled both out; a third reader would have been a
-- third chance to count them differently.

-- Delivered: a status webhook reported the knock's message delivered, or read
-- (a read message was delivered, whether or not its delivered status came).
CREATE FUNCTION knock_delivered(d documents) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM status_events s
        WHERE s.wa_message_id = d.knock_message_id AND s.status IN ('delivered', 'read')
    )
$$;

-- Answered: the person wrote to us after the knock left (a press included).
CREATE FUNCTION knock_answered(d documents) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM inbound_messages i
        WHERE i.person_id = d.person_id AND i.sent_at > d.knock_sent_at
    )
$$;
