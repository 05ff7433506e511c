"""The API's data access: one store module per resource, its SQL in `db/sql/api_<resource>.sql`.

A store function takes a connection (or the pool), the tenant (`project_id`, or `org_id` for the
organisation's own resources) and plain values; it runs named statements (`codity.db.queries`)
and returns response models or plain values. Every statement names the tenant, so an id of
another tenant matches no row even if a handler forgot to check it first.

State changes of jobs, queues (pause) and dead letters are not here: they are `codity.core`
operations, which take the project too (`core.cancel_job(conn, project_id, job_id)`).
Lists are keyset pages (`codity.api.pagination`); their filters are SQL fragments, one
statement per filter shape.
"""
