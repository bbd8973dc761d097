"""The docs site's benchmark figures, generated from the result files in bench/results (the
JSON figures and the tables the benchmark scripts write, the chart bench/summary.py draws), so
the site never retypes a number. docs/benchmarks.md holds the prose and a marker where each
generated part goes (`<!-- bench:NAME -->`); scripts/docs_hooks.py puts them in at build time.

Usage: python scripts/docs_bench.py   (prints the parts)
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "results"
#: The chart, as the site serves it.
CHART = "assets/bench/summary.png"
#: The benchmarks' own tables, in the order the page shows them.
TABLES = (
    "onnx",
    "end_to_end",
    "camera_trap",
    "detection",
    "images",
    "scaling",
    "where_time_goes",
)


def _summary_module():
    """bench/summary.py, which computes the headline ratios from the JSON figures."""
    spec = importlib.util.spec_from_file_location("bench_summary", ROOT / "bench" / "summary.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def machine(results: Path = RESULTS) -> str:
    """The machine the results were measured on, as the summary recorded it."""
    text = (results / "summary.md").read_text()
    section = text.split("## Machine", 1)[1].split("\n## ", 1)[0]
    return section.strip() + "\n"


def headline(results: Path = RESULTS) -> str:
    """The headline ratios, computed from the JSON figures as bench/summary.py computes them."""
    summary = _summary_module()
    lines = ["| figure | value (range of the rounds) | target | met |", "|---|---|---|---|"]
    for label, value, target in summary.headline(results):
        met = "" if target is None else ("yes" if value >= target else "no")
        shown_target = "" if target is None else f"{target:g}"
        lines.append(f"| {label} | {summary.shown(value)} | {shown_target} | {met} |")
    return "\n".join(lines) + "\n"


def tables(results: Path = RESULTS) -> str:
    """Each benchmark's own table, as its script wrote it, its title a third-level heading."""
    parts = []
    for name in TABLES:
        path = results / f"{name}.md"
        if path.exists():
            text = path.read_text().strip()
            parts.append(re.sub(r"^#+ ", "### ", text, count=1))
    return "\n\n".join(parts) + "\n"


def parts(results: Path = RESULTS) -> dict[str, str]:
    """The generated parts by marker name."""
    return {
        "machine": machine(results),
        "headline": headline(results),
        "chart": f"![the headline ratios, green where the target is met]({CHART})\n",
        "tables": tables(results),
    }


def fill(markdown: str, results: Path = RESULTS) -> str:
    """`markdown` with each `<!-- bench:NAME -->` marker replaced by its part; an unknown
    marker is an error."""
    found = parts(results)

    def part(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in found:
            raise KeyError(f"unknown benchmark marker {name!r}: one of {sorted(found)}")
        return found[name]

    return re.sub(r"<!-- bench:(\w+) -->", part, markdown)


if __name__ == "__main__":
    for name, text in parts().items():
        print(f"--- {name}\n{text}")
