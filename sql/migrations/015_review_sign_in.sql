-- 015: the review page's sign-ins live in Postgres, so every replica agrees.
--
-- A session is a row. The cookie carries a random key (signed with a key
-- derived from REVIEW_TOKEN); the row holds only the key's SHA-256, so reading
-- this table gives nobody a session. Signing out deletes the row: a copied
-- cookie is refused from then on, by every replica.
--
-- A wrong token is a row of review_sign_in_failures, counted per client and
-- overall over a sliding window (service/sessions.py: the limits and why);
-- review_known_clients remembers where reviewers signed in from, which keeps
-- them in while strangers are held by the overall limit. Each table is pruned
-- as it is written (queries_review.sql), so it holds about one window or one
-- session lifetime of rows.

CREATE TABLE review_sessions (
    key_hash   bytea PRIMARY KEY,
    reviewer   text NOT NULL,
    csrf       text NOT NULL,
    client     text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    expires_at timestamptz NOT NULL
);
CREATE INDEX review_sessions_expiry ON review_sessions (expires_at);

CREATE TABLE review_sign_in_failures (
    id        bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    client    text NOT NULL,
    failed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX review_sign_in_failures_client ON review_sign_in_failures (client, failed_at);
CREATE INDEX review_sign_in_failures_at ON review_sign_in_failures (failed_at);

CREATE TABLE review_known_clients (
    client            text PRIMARY KEY,
    last_signed_in_at timestamptz NOT NULL
);
CREATE INDEX review_known_clients_age ON review_known_clients (last_signed_in_at);
