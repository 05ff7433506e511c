"""docs/BENCHMARKS.md is generated: re-rendering it from its own figures reproduces it exactly.

Figures change from run to run, so the check is on everything else: a hand edit, or a change to
the report's template that was never regenerated with `codity bench report`, fails here. The
report carries its figures (a JSON comment at its end) so they can be read back whole.
"""

from __future__ import annotations

from pathlib import Path

from codity.cli.bench_report import Section, load, render_report

DOC = Path(__file__).resolve().parents[2] / "docs" / "BENCHMARKS.md"

#: Every benchmark the issues ask the report to show (engine's, pyapi's, reliability's).
EXPECTED_SECTIONS = (
    "Beside the peer (pgqueuer)",
    "Worker processes",
    "The engine beside the ceiling",
    "History",
    "A long transaction (the xmin horizon)",
    "Tracing (the worker's hot path)",
    "Live events (dashboard)",
    "Dashboard reads",
    "Flow control: each mechanism on vs off",
    "Recovery (real processes)",
)


def test_benchmarks_doc_is_what_the_report_command_writes() -> None:
    text = DOC.read_text()
    machine, sections, runs = load(text)
    assert render_report(machine, sections, runs) == text


#: Sections the report writes when their benchmark ran (added since the last regeneration).
OPTIONAL_SECTIONS: tuple[str, ...] = ()


def test_benchmarks_doc_has_every_benchmark() -> None:
    _, sections, _ = load(DOC.read_text())
    titles = [s.title for s in sections]
    assert [t for t in titles if t in EXPECTED_SECTIONS] == list(EXPECTED_SECTIONS)
    assert set(titles) <= {*EXPECTED_SECTIONS, *OPTIONAL_SECTIONS}
    by_title = {s.title: s for s in sections}
    peer = [row[0] for row in by_title["Beside the peer (pgqueuer)"].rows]
    assert any(label.startswith("throughput") for label in peer)
    assert any("at 200/s" in label for label in peer)
    assert any("at 2000/s" in label for label in peer)
    assert any(label.startswith("bulk enqueue") for label in peer)
    assert any(label.startswith("CPU per job") for label in peer)
    processes = by_title["Worker processes"]
    drains = [row[0] for row in processes.rows]
    assert drains[0].startswith("2 workers × capacity 100 in one process")
    assert [d.split(" worker")[0] for d in drains[1:]] == ["1", "2", "4"]
    assert any(column.startswith("cores busy") for column in processes.columns)
    assert "every core busy at that cost" in processes.columns
    flow = [row[0] for row in by_title["Flow control: each mechanism on vs off"].rows]
    for mechanism in ("fair shares", "key limit", "rate limit", "plain claim"):
        assert any(label.startswith(mechanism) for label in flow), mechanism
    reads = [row[0] for row in by_title["Dashboard reads"].rows]
    assert "overview" in reads
    assert any(label.startswith("jobs: payload") for label in reads)
    assert all(row[1] for s in sections for row in s.rows), "a row without a figure"


def test_a_section_renders_and_reads_back() -> None:
    rows = [["re-run after SIGKILL (lease 1500 ms, tick 200 ms)", "1,612 ms = 1.07 leases"]]
    section = Section("Recovery", "codity bench recovery", ["recovery", "codity"], rows, ["n."])
    text = render_report("m", [section], 3)
    assert "| re-run after SIGKILL (lease 1500 ms, tick 200 ms) | 1,612 ms = 1.07 leases |" in text
    assert load(text) == ("m", [section], 3)
