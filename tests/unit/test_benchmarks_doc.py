"""docs/BENCHMARKS.md is generated: re-rendering it from its own figures reproduces it exactly.

Figures change from run to run, so the check is on everything else: a hand edit, or a change to
the report's template that was never regenerated with `codity bench report`, fails here.
"""

from __future__ import annotations

import re
from pathlib import Path

from codity.cli.bench import render_report

DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"


def _rows(text: str, header: str) -> list[list[str]]:
    block = text.split(header, 1)[1].split("\n\n", 1)[0]
    lines = [line for line in block.splitlines()[1:] if line.startswith("| ")]
    return [[cell.strip() for cell in line.strip("|").split(" | ")] for line in lines]


def test_benchmarks_doc_is_what_the_report_command_writes() -> None:
    text = DOC.read_text()
    machine = re.search(r"^Machine: (.*)$", text, re.MULTILINE)
    runs = re.search(r"codity bench report --runs (\d+)", text)
    assert machine is not None
    assert runs is not None
    peer_rows = _rows(text, "| benchmark | codity (median) | pgqueuer (median) | ratio |")
    engine_rows = _rows(text, "| engine ceiling | codity (median) |")
    assert len(peer_rows) == 4, "throughput and three latency percentiles beside the peer"
    assert len(engine_rows) == 1
    recovery_header = "| recovery (real processes) | codity (median) |"
    recovery_rows = _rows(text, recovery_header) if recovery_header in text else None
    enqueue_rows = _rows(text, ENQUEUE_HEADER) if ENQUEUE_HEADER in text else None
    tracing_rows = _rows(text, TRACING_HEADER) if TRACING_HEADER in text else None
    events_rows = _rows(text, EVENTS_HEADER) if EVENTS_HEADER in text else None
    assert (
        render_report(
            machine.group(1),
            peer_rows,
            engine_rows,
            int(runs.group(1)),
            recovery_rows,
            enqueue_rows=enqueue_rows,
            tracing_rows=tracing_rows,
            events_rows=events_rows,
        )
        == text
    )


ENQUEUE_HEADER = "| bulk enqueue | codity (median) | pgqueuer (median) | ratio |"
TRACING_HEADER = "| tracing (the worker's hot path) | codity (median) | vs absent |"
EVENTS_HEADER = "| live events (dashboard) | codity (median) |"


def test_events_rows_render_and_read_back_only_when_measured() -> None:
    rows = [["live events: drain cost", "6,773 vs 6,314 jobs/s: -7.3% cost"],
            ["live events: 200 open streams", "2.6 msg/s per stream"]]  # fmt: skip
    text = render_report("m", [["a", "b", "c", "d"]], [["e", "f"]], 3, events_rows=rows)
    assert _rows(text, EVENTS_HEADER) == rows
    assert "**live events**" in text
    assert EVENTS_HEADER not in render_report("m", [["a", "b", "c", "d"]], [["e", "f"]], 3)


def test_enqueue_and_tracing_rows_render_and_read_back() -> None:
    enqueue = [["bulk enqueue: x", "55,000 jobs/s", "40,000 jobs/s", "1.38×"],
               ["bulk enqueue: `codity enqueue -n 100000`", "52,000 jobs/s", "—", "—"]]  # fmt: skip
    tracing = [["tracing: absent", "9,000 jobs/s", "1.00× absent"]]
    text = render_report("m", [["a", "b", "c", "d"]], [["e", "f"]], 3,
                         enqueue_rows=enqueue, tracing_rows=tracing)  # fmt: skip
    assert _rows(text, ENQUEUE_HEADER) == enqueue
    assert _rows(text, TRACING_HEADER) == tracing
    assert "**bulk enqueue**" in text
    assert "**tracing**" in text


def test_recovery_rows_render_and_read_back() -> None:
    rows = [["re-run after SIGKILL (lease 1500 ms, tick 200 ms)", "1,612 ms = 1.07 leases"]]
    text = render_report("m", [["a", "b", "c", "d"]], [["e", "f"]], 3, rows)
    assert "**recovery**" in text
    assert _rows(text, "| recovery (real processes) | codity (median) |") == rows
    assert "recovery" not in render_report("m", [["a", "b", "c", "d"]], [["e", "f"]], 3)
