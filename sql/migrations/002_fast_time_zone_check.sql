-- 002: the time-zone CHECK on people read pg_timezone_names, ~40 ms a row;
-- a bulk load of 100k people took over an hour. Asking Postgres to use the
-- zone costs microseconds and accepts exactly what AT TIME ZONE accepts.
CREATE OR REPLACE FUNCTION is_valid_time_zone(tz text) RETURNS boolean
LANGUAGE plpgsql STABLE AS $$
BEGIN
    PERFORM now() AT TIME ZONE tz;
    RETURN true;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN false;
END
$$;
