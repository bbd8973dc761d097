"""The docs site: every Python example of the guides and the README runs, the API reference has
a page per stage with every param's type, default and doc, and the built site's links resolve
and it renders in headless Chromium."""

from __future__ import annotations

import html
import json
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote, urlsplit

import cv2
import numpy as np
import pytest
from conftest import ROOT, generated_classes

sys.path.insert(0, str(ROOT / "scripts"))
import docs_api  # noqa: E402

PAGES = sorted((ROOT / "docs").glob("*.md")) + [ROOT / "README.md"]
CHROMIUM = "/usr/bin/chromium"
SCREENSHOTS = ROOT / "docs" / ".screenshots"
NOT_RUN = re.compile(r"<!-- not-run: (\S.*?) -->")


def python_blocks(page: Path) -> list[tuple[int, str, str | None]]:
    """(line, code, reason not run or None) of each ```python block of `page`: a block is not
    run where the line before it is `<!-- not-run: REASON -->`."""
    lines = page.read_text().splitlines()
    blocks, i = [], 0
    while i < len(lines):
        if lines[i].strip() == "```python":
            end = lines.index("```", i + 1)
            before = lines[i - 1] if i else ""
            marked = NOT_RUN.fullmatch(before.strip())
            blocks.append((i + 1, "\n".join(lines[i + 1 : end]), marked and marked.group(1)))
            i = end
        i += 1
    return blocks


def test_every_page_has_examples_and_marks_name_a_reason():
    """The not-run mark is the only way out, and it always says why; a malformed mark (no
    reason, a typo) leaves the block to run."""
    pages = {p.name: python_blocks(p) for p in PAGES}
    for name in ("getting-started.md", "images.md", "onnx.md", "detection.md", "training.md"):
        assert any(reason is None for _, _, reason in pages[name]), name
    for page in PAGES:
        for line, text in enumerate(page.read_text().splitlines(), 1):
            if text.lstrip().startswith("<!--") and "not-run" in text:
                assert NOT_RUN.fullmatch(text.strip()), f"{page.name}:{line}: {text}"
    marked = [(p, line) for p, blocks in pages.items() for line, _, r in blocks if r]
    assert len(marked) == 2, marked  # the streaming query and the Connect server


#: Each page's namespace once its blocks ran, for the tests that check what they computed.
_RAN: dict[Path, dict] = {}


def run_page(page: Path) -> dict:
    """Runs a page's runnable blocks once, in order, in one namespace, on the suite's session
    (each block's `mmlspark.session()` returns it), in a temporary working folder."""
    if page not in _RAN:
        namespace: dict = {"__name__": f"docs_{page.stem}"}
        for line, code, reason in python_blocks(page):
            if reason is None:
                exec(compile(code, f"{page.name}:{line}", "exec"), namespace)
        _RAN[page] = namespace
    return _RAN[page]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_examples_run(spark, page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    namespace = run_page(page)
    if "spark" in namespace:
        assert namespace["spark"] is spark


def test_examples_compute_what_they_say(spark, tmp_path, monkeypatch):
    """The values the examples state, against independent references: ClassBalancer's weights
    by hand (n / (k * count)), the ONNX example's argmax against onnxruntime in Python on the
    tensors ImageTransformer gave, the Python backend's classes against the JVM's (the page
    asserts it), the detector's boxes against the drawn animals (the page asserts it)."""
    import onnxruntime

    monkeypatch.chdir(tmp_path)
    training = run_page(ROOT / "docs" / "training.md")
    weights = {r.id: r.weight for r in training["model"].transform(training["df"]).collect()}
    assert weights == pytest.approx({1: 3 / (2 * 1), 2: 3 / (2 * 2), 3: 3 / (2 * 2)})

    onnx = run_page(ROOT / "docs" / "onnx.md")
    rows = onnx["scored"].select("tensor", "prediction").collect()
    assert len(rows) == 40
    session = onnxruntime.InferenceSession(onnx["classifier"])
    batch = np.array([r.tensor for r in rows], np.float32).reshape(len(rows), 3, 64, 64)
    logits = session.run(["logits"], {"image": batch})[0]
    assert [r.prediction for r in rows] == list(logits.argmax(axis=1).astype(float))


def test_api_reference_has_every_stage_and_param(spark):
    """A page per public stage, each listing every param with the default a stage made on the
    JVM backend has (the generator makes its stages without a JVM) and the param's doc."""
    pages = docs_api.pages()
    classes = generated_classes()
    assert len(classes) >= 30
    for cls in classes:
        area = cls.__module__.split(".")[1]
        text = pages[f"api/{area}/{cls.__name__}.md"]
        stage = cls()
        assert f"# {cls.__name__}\n" in text
        for param in stage.params:
            row = next((r for r in text.splitlines() if r.startswith(f"| `{param.name}` |")), None)
            assert row is not None, (cls.__name__, param.name)
            if stage.hasDefault(param):
                shown = repr(stage.getOrDefault(param)).replace("|", "\\|")
                assert f"| `{shown}` |" in row, (cls.__name__, param.name, row)
            else:
                assert "| (none) |" in row, row
            assert param.doc.replace("|", "\\|") in row
        assert f"({area}/{cls.__name__}.md)" in pages["api/index.md"]
    onnx = pages["api/onnx/ONNXModel.md"]
    assert "| `miniBatchSize` | `int` | `64` |" in onnx
    assert "| `deviceType` | `str` | `'auto'` |" in onnx


def _internal_links(site: Path) -> list[tuple[Path, str]]:
    found = []
    for page in site.rglob("*.html"):
        for url in re.findall(r'(?:href|src)="([^"]+)"', page.read_text()):
            url = html.unescape(url)
            if not urlsplit(url).scheme and not url.startswith(("//", "mailto:")):
                found.append((page, url))
    return found


def _ids(page: Path, cache: dict[Path, set[str]]) -> set[str]:
    if page not in cache:
        cache[page] = set(re.findall(r'\bid="([^"]+)"', page.read_text()))
    return cache[page]


def _screenshot(url: str, path: Path) -> np.ndarray:
    subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
         "--window-size=1280,900", f"--screenshot={path}", url],
        check=True, capture_output=True, timeout=120,
    )  # fmt: skip
    image = cv2.imread(str(path))
    assert image is not None and image.shape == (900, 1280, 3), path
    return image


@pytest.mark.system
def test_site_builds_links_resolve_and_renders(tmp_path):
    """`mkdocs build --strict` (what make docs runs), every internal link and asset of the built
    HTML resolves (files and anchors), the search index holds every page, and Chromium renders
    the home page and an API page with the theme's stylesheet applied."""
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    assert Path(CHROMIUM).exists(), f"{CHROMIUM} is missing: make browser installs it"
    site = tmp_path / "site"
    build(load_config(str(ROOT / "mkdocs.yml"), site_dir=str(site), strict=True))

    api_pages = list((site / "api").rglob("*.html"))
    assert len(api_pages) == len(generated_classes()) + 1  # and the index
    ids: dict[Path, set[str]] = {}
    for page, url in _internal_links(site):
        parts = urlsplit(url)
        base = site if parts.path.startswith("/") else page.parent  # 404.html's are absolute
        target = (base / unquote(parts.path).lstrip("/")).resolve() if parts.path else page
        if target.is_dir():
            target = target / "index.html"
        assert target.is_file(), f"{page.relative_to(site)}: {url} is missing"
        if parts.fragment and target.suffix == ".html":
            assert parts.fragment in _ids(target, ids), f"{page.relative_to(site)}: {url}"
    for page in site.rglob("*.html"):
        assert not re.search(r'<(?:script|img|link)[^>]+(?:src|href)="https?:', page.read_text())

    index = json.loads((site / "search" / "search_index.json").read_text())
    locations = {doc["location"].split("#")[0] for doc in index["docs"]}
    assert {"index.html", "api/onnx/ONNXModel.html", "camera-trap.html"} <= locations

    benchmarks = (site / "benchmarks.html").read_text()
    assert "<!-- bench:" not in benchmarks and "ResNet-50: ONNXModel / raw ORT Java" in benchmarks
    assert (site / "assets" / "bench" / "summary.png").is_file()

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    home = _screenshot((site / "index.html").as_uri(), SCREENSHOTS / "home.png")
    api_page = (site / "api" / "onnx" / "ONNXModel.html").as_uri()
    api = _screenshot(api_page, SCREENSHOTS / "api-onnxmodel.png")
    for image in (home, api):
        # Rendered, not blank: the theme's header bar in its primary colour (indigo, #4051b5 in
        # BGR within rounding) across the top, and dark text on white below it.
        header = image[10:40, 600:700].reshape(-1, 3).mean(axis=0)
        assert np.allclose(header, [181, 81, 64], atol=12), header
        body = image[100:, 250:1000]
        assert (body > 240).all(axis=2).mean() > 0.5 and (body < 100).all(axis=2).mean() > 0.005
    assert not np.array_equal(home, api)
