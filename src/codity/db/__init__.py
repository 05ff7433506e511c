"""Database layer: schema, migrations, connections, named SQL, seed and EXPLAIN harness."""
