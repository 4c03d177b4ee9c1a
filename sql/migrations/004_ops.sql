-- 004: what the ops checks need to stay cheap (they run every 5 minutes):
-- when a generation failed, and partial indexes for the "last day" questions.

-- When generation failed for good. Set by the database itself whoever makes
-- the transition (generation job, exhausted claims), so the "failed in the
-- last day" check cannot miss one.
ALTER TABLE documents ADD COLUMN generation_failed_at timestamptz;
UPDATE documents SET generation_failed_at = created_at WHERE status = 'failed';

CREATE FUNCTION note_generation_failed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    -- unless the statement set it itself (a backfill, a test)
    IF NEW.generation_failed_at IS NOT DISTINCT FROM OLD.generation_failed_at THEN
        NEW.generation_failed_at := now();
    END IF;
    RETURN NEW;
END
$$;

CREATE TRIGGER documents_generation_failed_at
    BEFORE UPDATE OF status ON documents
    FOR EACH ROW WHEN (NEW.status = 'failed' AND OLD.status IS DISTINCT FROM 'failed')
    EXECUTE FUNCTION note_generation_failed();

CREATE INDEX documents_generation_failed_at ON documents (generation_failed_at)
    WHERE status = 'failed';

-- Abandoned in the last day (the abandoned check, the report).
CREATE INDEX documents_abandoned_at ON documents (abandoned_at)
    WHERE abandoned_at IS NOT NULL;

-- Knocks in the last day (the knock-health check, the report).
CREATE INDEX documents_knock_sent_at ON documents (knock_sent_at)
    WHERE knock_sent_at IS NOT NULL;

-- People reached outside the window in the rolling 24 h (the tier check).
CREATE INDEX people_last_knock_at ON people (last_knock_at)
    WHERE last_knock_at IS NOT NULL;
