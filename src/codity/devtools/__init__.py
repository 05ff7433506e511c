"""Tooling beside the runtime: what developers and operators run by hand or from the CLI, and
what no service imports while it runs.

- `seed`: the demo data of `codity db demo`;
- `explain`: the EXPLAIN harness of `codity db explain` (docs/EXPLAIN.md) and the plan tests;
- `api_contract`: the generator of docs/API_CONTRACT.md.

The import-linter layers put this package above the api, the worker, the scheduler, core and db,
so none of them can import it: a service never loads a seed or a doc generator.
"""
