-- name: api_health_has_migrations
SELECT to_regclass('public.alembic_version') IS NOT NULL;

-- name: api_health_revision
SELECT version_num FROM alembic_version;
