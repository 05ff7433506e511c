"""`python -m codity`: the same CLI as the `codity` console script."""

from __future__ import annotations

from codity.cli import main

if __name__ == "__main__":
    main()
