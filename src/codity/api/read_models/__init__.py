"""The API's read side: SQL that answers lists, details and statistics.

Every query here is scoped by `project_id` (or the caller's `org_id` for org-wide reads) in
its WHERE clause, so an id belonging to another tenant simply matches no row. State changes do
not live here: they go through `codity.core`.
"""
