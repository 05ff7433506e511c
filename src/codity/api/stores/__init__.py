"""One store module per API resource: its reads and writes, the SQL in a named `.sql` file
under `codity/db/sql/` (`api_<resource>.sql`), every statement scoped by the project."""
