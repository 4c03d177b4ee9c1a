-- 035: when what an alert says was seen, apart from when the row was written.
--
-- An episode (a pause, a template's trouble, a check's waiting state) is one
-- cause under one key: opened once, reminded, resolved once, whichever check,
-- run or process reports it (watch/episodes.py). A report is evidence about
-- the moment it was observed: a check's evaluation minutes before the alert
-- sensor reads it, a sender's refusal at once. A failing report observed
-- before the episode was resolved is about what the resolution ended and must
-- not open it again; a passing one observed before it opened must not close
-- it. Rows written before this migration were observed when they were written.
ALTER TABLE ops_alerts ADD COLUMN observed_at timestamptz;
UPDATE ops_alerts SET observed_at = created_at;
ALTER TABLE ops_alerts ALTER COLUMN observed_at SET DEFAULT now(),
                       ALTER COLUMN observed_at SET NOT NULL;
