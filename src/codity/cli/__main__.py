"""`python -m codity.cli ...`: how tests and `codity up` start the services as child processes."""

from __future__ import annotations

from codity.cli import main

main()
