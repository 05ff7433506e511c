"""The permission matrix, generated from ALL_ROUTES.

`docs/SECURITY_GUIDELINES.md` holds the generated table between two marker lines; a test
fails when the two differ. Regenerate with:

    python -m codity.api.permissions docs/SECURITY_GUIDELINES.md
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path

from codity.api.routing import Route, Scope

BEGIN = (
    "<!-- permission-matrix:begin (generated from ALL_ROUTES: python -m codity.api.permissions) -->"
)
END = "<!-- permission-matrix:end -->"

_WHO = {
    Scope.PUBLIC: "anyone (rate-limited)",
    Scope.USER: "any signed-in user (not API keys)",
}


def _who(route: Route) -> str:
    if route.min_role is None:
        return _WHO[route.scope]
    keys = " or API key" if route.scope is Scope.PROJECT else " (not API keys)"
    return f"{route.min_role.value}+{keys}"


def render_matrix(routes: Sequence[Route]) -> str:
    lines = [
        "| Method | Path (under /api/v1) | Scope | Who may call | Rate limit |",
        "|---|---|---|---|---|",
    ]
    for r in routes:
        limit = r.rate_limit.value if r.rate_limit else ""
        lines.append(f"| {r.method} | `{r.path}` | {r.scope.value} | {_who(r)} | {limit} |")
    return "\n".join(lines)


def replace_matrix(text: str, routes: Sequence[Route]) -> str:
    head, begin, rest = text.partition(BEGIN)
    _, end, tail = rest.partition(END)
    if not begin or not end:
        raise ValueError(f"the document has no {BEGIN!r} ... {END!r} section")
    return f"{head}{BEGIN}\n{render_matrix(routes)}\n{END}{tail}"


def main(argv: list[str]) -> int:
    from codity.api.routes import ALL_ROUTES

    path = Path(argv[0] if argv else "docs/SECURITY_GUIDELINES.md")
    path.write_text(replace_matrix(path.read_text(), ALL_ROUTES))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
