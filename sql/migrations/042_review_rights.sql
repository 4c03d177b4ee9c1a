-- 042: the review page's rights. A session says whether its person is an
-- operator (OPERATOR_TOKENS: may cancel and resend any document) or a reviewer
-- (REVIEW_TOKEN, REVIEW_TOKENS: approves and rejects only). Sessions started
-- before are a reviewer's.
--
-- The daily cap on resends (DELIVERY_RESENDS_PER_DAY) needs no table of its
-- own: it counts a document's resends in document_actions, under the row lock
-- every operator action takes first (queries_operator.sql: recent_resends), by
-- the index on (document_id, id).

ALTER TABLE review_sessions ADD COLUMN operator boolean NOT NULL DEFAULT false;
