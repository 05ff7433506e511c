"""Request and response models of the project resources (queues, jobs, schedules, ...).

Naming follows one pattern: `<Thing>Create` / `<Thing>Update` for request bodies (unknown
fields are refused), `<Thing>Public` for what a list or a mutation answers, `<Thing>Detail`
for a richer single read, `<Things>Page` for a keyset-paginated list.
"""
