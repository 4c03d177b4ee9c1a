#!/bin/sh
# The bundled Postgres's first start (deploy/docker-compose.yml mounts this into
# /docker-entrypoint-initdb.d): the app's database and Dagster's, each owned by a
# user of its own, with the passwords of deploy/delivery.env. The tables come
# later, from the migrate service (delivery-pipeline db upgrade; Dagster creates
# its own on first use and `dagster instance migrate` upgrades them).
set -eu
psql -v ON_ERROR_STOP=1 --username "$POSTGRES_USER" --dbname postgres \
    -v delivery_password="$DELIVERY_DB_PASSWORD" \
    -v dagster_user="$DAGSTER_PG_USER" \
    -v dagster_password="$DAGSTER_PG_PASSWORD" \
    -v dagster_db="$DAGSTER_PG_DB" <<'SQL'
CREATE ROLE delivery LOGIN PASSWORD :'delivery_password';
CREATE DATABASE delivery OWNER delivery;
CREATE ROLE :"dagster_user" LOGIN PASSWORD :'dagster_password';
CREATE DATABASE :"dagster_db" OWNER :"dagster_user";
SQL
