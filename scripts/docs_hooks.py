"""MkDocs hooks of the docs site (mkdocs.yml): the API reference's pages (scripts/docs_api.py)
and the benchmark figures (scripts/docs_bench.py) are generated into the build, never committed,
so neither can drift from the code or the results."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import docs_api  # noqa: E402
import docs_bench  # noqa: E402

_API: dict[str, str] = {}


def _api_pages() -> dict[str, str]:
    if not _API:
        _API.update(docs_api.pages())
    return _API


def on_config(config: Any) -> Any:
    """The nav's API reference section: the index, then a page per stage, by area."""
    pages = _api_pages()
    areas: dict[str, list[dict[str, str]]] = {}
    for path in sorted(p for p in pages if p != "api/index.md"):
        _, area, name = path.split("/")
        areas.setdefault(f"mmlspark.{area}", []).append({name[: -len(".md")]: path})
    section = [{"Overview": "api/index.md"}] + [{a: items} for a, items in sorted(areas.items())]
    nav = config["nav"]
    for i, entry in enumerate(nav):
        if isinstance(entry, dict) and entry.get("API reference") == "api/index.md":
            nav[i] = {"API reference": section}
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for path, text in _api_pages().items():
        files.append(File.generated(config, path, content=text))
    chart = docs_bench.RESULTS / "summary.png"
    files.append(File.generated(config, docs_bench.CHART, abs_src_path=str(chart)))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    if page.file.src_uri == "benchmarks.md":
        return docs_bench.fill(markdown)
    return markdown
