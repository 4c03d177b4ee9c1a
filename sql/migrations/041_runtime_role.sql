-- 041: a role for the running system, apart from the role that owns the schema.
--
-- Migrations run as the schema's owner (DELIVERY_MIGRATION_DATABASE_URL, else
-- DATABASE_URL): they create, alter and drop tables. Everything else (the webhook
-- service, Dagster's runs and sensors, the CLI) reads and writes rows and nothing
-- more, so it may connect as a role that cannot change a table:
-- delivery_runtime, a group role (NOLOGIN) a deployment grants to its login role
-- (GRANT delivery_runtime TO delivery_app: docs/how-to/deploy.md, "Two database
-- roles").
--
-- It gets rows (SELECT, INSERT, UPDATE, DELETE), sequences and functions, on every
-- object there is now and, by default privileges of the role running the
-- migrations, on every one a later migration creates. Nothing here changes what
-- a deployment with one role does.
--
-- Roles belong to the server, not the database: the role may exist already
-- (another database of the same server made it), and a migrating role without
-- CREATEROLE cannot make it; then the grants wait until someone who may has
-- made it and this file is applied again by hand (the how-to says so), and
-- every migration still applies.

DO $$
BEGIN
    IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'delivery_runtime') THEN
        BEGIN
            CREATE ROLE delivery_runtime NOLOGIN;
        EXCEPTION
            WHEN duplicate_object THEN NULL;  -- made meanwhile by another database's migration
            WHEN insufficient_privilege THEN
                RAISE WARNING 'delivery_runtime was not created (this role may not create '
                    'roles): the runtime role''s grants are skipped; see docs/how-to/deploy.md';
                RETURN;
        END;
    END IF;
    EXECUTE format('GRANT USAGE ON SCHEMA %I TO delivery_runtime', current_schema());
    EXECUTE format(
        'GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA %I TO delivery_runtime',
        current_schema()
    );
    EXECUTE format(
        'GRANT USAGE, SELECT, UPDATE ON ALL SEQUENCES IN SCHEMA %I TO delivery_runtime',
        current_schema()
    );
    EXECUTE format(
        'GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA %I TO delivery_runtime', current_schema()
    );
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I '
        'GRANT SELECT, INSERT, UPDATE, DELETE ON TABLES TO delivery_runtime',
        current_schema()
    );
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I '
        'GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO delivery_runtime',
        current_schema()
    );
    EXECUTE format(
        'ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT EXECUTE ON FUNCTIONS TO delivery_runtime',
        current_schema()
    );
END
$$;
