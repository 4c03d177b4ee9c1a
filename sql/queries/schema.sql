-- The schema as the catalog states it (delivery_pipeline/store/schema.py): what
-- delivery_pipeline_tests/store/test_schema.py compares between a migrated database
-- and one loaded from sql/schema.sql, on the same server.

-- name: schema_catalog
-- One line per object of the public schema, in the server's own words (the same text for the same schema on one server; dropped columns and catalog numbering do not show).
WITH rel AS (
    SELECT c.oid, c.relname, c.relkind, c.reloptions
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname = 'public'
)
SELECT 'relation ' || relname || ' ' || relkind::text || ' ' || coalesce(reloptions::text, '')
FROM rel WHERE relkind IN ('r', 'p', 'v', 'm', 'f', 'S')
UNION ALL
SELECT 'column ' || r.relname || ' #' || row_number() OVER w || ' ' || a.attname || ' '
       || format_type(a.atttypid, a.atttypmod)
       || CASE WHEN a.attnotnull THEN ' not null' ELSE '' END
       || coalesce(' default ' || pg_get_expr(d.adbin, d.adrelid), '')
       || CASE WHEN a.attidentity <> '' THEN ' identity ' || a.attidentity::text ELSE '' END
       || CASE WHEN a.attgenerated <> '' THEN ' generated ' || a.attgenerated::text ELSE '' END
FROM rel r
JOIN pg_attribute a ON a.attrelid = r.oid AND a.attnum > 0 AND NOT a.attisdropped
LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
WHERE r.relkind IN ('r', 'p', 'v', 'm', 'f')
WINDOW w AS (PARTITION BY r.oid ORDER BY a.attnum)
UNION ALL
SELECT 'constraint ' || r.relname || ' ' || con.conname || ' ' || pg_get_constraintdef(con.oid)
FROM pg_constraint con JOIN rel r ON r.oid = con.conrelid
UNION ALL
SELECT 'index ' || pg_get_indexdef(i.indexrelid)
FROM pg_index i JOIN rel r ON r.oid = i.indrelid
UNION ALL
SELECT 'view ' || relname || ' ' || pg_get_viewdef(oid, true)
FROM rel WHERE relkind IN ('v', 'm')
UNION ALL
SELECT 'function ' || pg_get_functiondef(p.oid)
FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
WHERE n.nspname = 'public'
UNION ALL
SELECT 'trigger ' || pg_get_triggerdef(t.oid)
FROM pg_trigger t JOIN rel r ON r.oid = t.tgrelid
WHERE NOT t.tgisinternal
UNION ALL
SELECT 'sequence ' || r.relname || ' ' || format_type(s.seqtypid, NULL) || ' ' || s.seqstart
       || ' ' || s.seqincrement || ' ' || s.seqmin || ' ' || s.seqmax || ' ' || s.seqcache
       || ' ' || s.seqcycle::text
       || coalesce(' owned by ' || (SELECT o.relname || '.' || a.attname
                                    FROM pg_depend dep
                                    JOIN pg_class o ON o.oid = dep.refobjid
                                    JOIN pg_attribute a ON a.attrelid = dep.refobjid
                                                       AND a.attnum = dep.refobjsubid
                                    WHERE dep.objid = r.oid AND dep.classid = 'pg_class'::regclass
                                      AND dep.deptype IN ('a', 'i')), '')
FROM pg_sequence s JOIN rel r ON r.oid = s.seqrelid
UNION ALL
SELECT 'type ' || t.typname || ' ' || t.typtype::text || ' ' || format_type(t.oid, NULL)
FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
WHERE n.nspname = 'public' AND t.typtype IN ('e', 'd', 'r', 'm')
UNION ALL
SELECT 'extension ' || extname FROM pg_extension
UNION ALL
-- A column's comment by the column's name: its number depends on the columns
-- dropped before it, which the migrations replay and the schema file does not.
SELECT 'comment ' || c.relname || ' ' || coalesce(a.attname, '') || ' ' || d.description
FROM pg_description d JOIN rel c ON c.oid = d.objoid AND d.classoid = 'pg_class'::regclass
LEFT JOIN pg_attribute a ON a.attrelid = d.objoid AND a.attnum = d.objsubid AND d.objsubid > 0

-- name: defer_function_checks
-- Create functions without checking their bodies until they run, in this transaction (pg_dump puts functions before the tables they read).
SET LOCAL check_function_bodies = false
