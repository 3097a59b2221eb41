"""``python -m bench --load-only --only X``: the page keeps its order, X's lines change."""

from __future__ import annotations

from bench.__main__ import splice

HEAD = "# Benchmarks\n\nSome rows above.\n"
OLD_SECTION = """## Throughput under load

Old method.

Measured yesterday.

| Case | Baseline | charter | ratio |
|---|---|---:|---:|
| MCP | SDK | 10 | 1.0x |
| REST | FastAPI | 20 | 1.1x |
| Replicas | one | 30 | 1.7x |

### Memory under load

| Case | Baseline | RSS after | ratio |
|---|---|---:|---:|
| REST: RSS | before | 60 | 1.0x |

### What each load case measures

- **MCP** (vs SDK): what MCP measures.
- **REST** (vs FastAPI): what REST measures.
- **Replicas** (vs one): what replicas measure.

### Load cases that did not run

- **REST** (vs FastAPI): wrk was missing.
"""


def _section(*lines: str) -> list[str]:
    return ["## Throughput under load", "", "New method.", "", "Measured today.", "", *lines]


TABLE_HEAD = ("| Case | Baseline | charter | ratio |", "|---|---|---:|---:|")


def test_a_case_run_alone_changes_its_lines_where_they_stand() -> None:
    fresh = _section(
        *TABLE_HEAD,
        "| Replicas | one | 31 | 1.8x |",
        "",
        "### What each load case measures",
        "",
        "- **Replicas** (vs one): what replicas measure, reworded.",
    )
    page = splice(HEAD + "\n" + OLD_SECTION, fresh, replace=False)
    expected = (
        OLD_SECTION.replace("Old method.", "New method.")
        .replace("Measured yesterday.", "Measured today.")
        .replace("| Replicas | one | 30 | 1.7x |", "| Replicas | one | 31 | 1.8x |")
        .replace("what replicas measure.", "what replicas measure, reworded.")
    )
    assert page == HEAD.rstrip("\n") + "\n\n" + expected


def test_a_case_that_now_ran_drops_its_old_failure_and_a_new_case_is_added() -> None:
    fresh = _section(
        *TABLE_HEAD,
        "| REST | FastAPI | 21 | 1.2x |",
        "| gRPC | grpcio | 5 | 0.9x |",
        "",
        "### What each load case measures",
        "",
        "- **REST** (vs FastAPI): what REST measures.",
        "- **gRPC** (vs grpcio): what gRPC measures.",
        "",
        "### Load cases that did not run",
        "",
        "- **SOAP** (vs zeep): zeep was missing.",
    )
    lines = splice(HEAD + "\n" + OLD_SECTION, fresh, replace=False).splitlines()
    table = [line for line in lines if line.startswith("| ") and "Case" not in line]
    assert table == [
        "| MCP | SDK | 10 | 1.0x |",
        "| REST | FastAPI | 21 | 1.2x |",
        "| Replicas | one | 30 | 1.7x |",
        "| gRPC | grpcio | 5 | 0.9x |",
        "| REST: RSS | before | 60 | 1.0x |",
    ]
    failed = lines[lines.index("### Load cases that did not run") :]
    assert failed == [
        "### Load cases that did not run",
        "",
        "- **SOAP** (vs zeep): zeep was missing.",
    ]
    notes = [line for line in lines if line.startswith("- **")]
    assert notes[:4] == [
        "- **MCP** (vs SDK): what MCP measures.",
        "- **REST** (vs FastAPI): what REST measures.",
        "- **Replicas** (vs one): what replicas measure.",
        "- **gRPC** (vs grpcio): what gRPC measures.",
    ]


def test_a_page_without_a_load_table_takes_the_new_section_whole() -> None:
    fresh = _section(*TABLE_HEAD, "| MCP | SDK | 11 | 1.1x |")
    page = splice(HEAD, fresh, replace=False)
    assert page == HEAD.rstrip("\n") + "\n\n" + "\n".join(fresh) + "\n"


def test_the_last_failure_gone_takes_its_heading_with_it() -> None:
    fresh = _section(*TABLE_HEAD, "| REST | FastAPI | 21 | 1.2x |")
    page = splice(HEAD + "\n" + OLD_SECTION, fresh, replace=False)
    assert "did not run" not in page
    assert page.endswith("- **Replicas** (vs one): what replicas measure.\n")


def test_a_partial_run_keeps_the_pages_time_and_says_what_ran_again() -> None:
    def measured(when: str, load: str) -> str:
        return (
            f"Measured {when} UTC on 2 CPUs with a load average of {load} (1, 5, 15 minutes) "
            "when the last case ended (wrk and the server under load account for about 2)."
        )

    old = OLD_SECTION.replace("Measured yesterday.", measured("2026-12-06 07:41", "1.1, 1.3, 1.6"))
    fresh = [
        "## Throughput under load",
        "",
        "New method.",
        "",
        measured("2026-12-07 08:18", "2.0, 3.9, 2.8"),
        "",
        *TABLE_HEAD,
        "| Replicas | one | 31 | 1.8x |",
    ]
    lines = splice(HEAD + "\n" + old, fresh, replace=False).splitlines()
    assert measured("2026-12-07 08:18", "2.0, 3.9, 2.8") not in lines
    assert (
        measured("2026-12-06 07:41", "1.1, 1.3, 1.6")
        + " Run again alone at 2026-12-07 08:18 UTC (load average 2.0, 3.9, 2.8): Replicas."
    ) in lines
    assert "New method." in lines


def test_a_partial_run_again_takes_its_cases_from_the_earlier_runs_sentence() -> None:
    earlier = (
        "Measured 2026-12-07 11:56 UTC on 2 CPUs with a load average of 1.2, 1.2, 1.4 "
        "(1, 5, 15 minutes) when the last case ended."
        " Run again alone at 2026-12-07 12:02 UTC (load average 1.2, 1.1, 1.3): "
        "Replicas (2 of them); REST."
        " Run again alone at 2026-12-07 12:30 UTC (load average 1.0, 1.1, 1.2): "
        "Replicas (2 of them)."
    )
    old = OLD_SECTION.replace("Measured yesterday.", earlier).replace(
        "| Replicas |", "| Replicas (2 of them) |"
    )
    fresh = [
        "## Throughput under load",
        "",
        "New method.",
        "",
        "Measured 2026-12-07 13:32 UTC on 2 CPUs with a load average of 1.4, 1.9, 2.1 "
        "(1, 5, 15 minutes) when the last case ended.",
        "",
        *TABLE_HEAD,
        "| Replicas (2 of them) | one | 31 | 1.8x |",
    ]
    lines = splice(HEAD + "\n" + old, fresh, replace=False).splitlines()
    (line,) = [line for line in lines if line.startswith("Measured ")]
    # The 12:02 run's REST row is still on the page; its replica row and the 12:30 run's
    # are not: the sentences say only what the page still shows.
    assert line == (
        "Measured 2026-12-07 11:56 UTC on 2 CPUs with a load average of 1.2, 1.2, 1.4 "
        "(1, 5, 15 minutes) when the last case ended."
        " Run again alone at 2026-12-07 12:02 UTC (load average 1.2, 1.1, 1.3): REST."
        " Run again alone at 2026-12-07 13:32 UTC (load average 1.4, 1.9, 2.1): "
        "Replicas (2 of them)."
    )
