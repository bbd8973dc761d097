"""The docs site's API reference, generated from the Python wrappers: a page per public stage of
every `mmlspark` area package (its class docstring, and every param with its type, default and
doc), and an index of them. It imports the package and walks the stages, so the reference
cannot drift from the code; the pages are written into the build (docs/hooks.py), never
committed.

Usage: python scripts/docs_api.py [OUT_DIR]   (writes the pages as files, to read them)
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

#: Area packages that hold no stages.
NOT_STAGES = ("core", "jars", "apps", "io", "resources")


@dataclass(frozen=True)
class ParamDoc:
    name: str
    type: str
    default: str | None
    doc: str


@dataclass(frozen=True)
class StageDoc:
    cls: type
    area: str
    kind: str
    params: tuple[ParamDoc, ...]

    @property
    def name(self) -> str:
        return self.cls.__name__

    @property
    def page(self) -> str:
        """The page's path inside the site."""
        return f"api/{self.area}/{self.name}.md"


def stage_classes() -> list[tuple[str, type]]:
    """(area, class) of every public stage class the area packages export, by area and name."""
    import mmlspark
    from mmlspark.core.wrapper import MMLParams

    found = []
    for info in pkgutil.iter_modules(mmlspark.__path__):
        if info.name.startswith("_") or not info.ispkg or info.name in NOT_STAGES:
            continue
        module = importlib.import_module(f"mmlspark.{info.name}")
        for name in sorted(getattr(module, "__all__", [])):
            value = getattr(module, name)
            # a stage another area also exports under SynapseML's package (SummarizeData in
            # mmlspark.stages) has its page in its own area only
            own = getattr(value, "__module__", "").startswith(f"mmlspark.{info.name}.")
            if isinstance(value, type) and issubclass(value, MMLParams) and own:
                found.append((info.name, value))
    return found


def _defaults(cls: type) -> dict[str, Any]:
    """The defaults the wrapper sets when it is made, read off a made instance. The stage is
    made without a JVM stage behind it (the docs build starts no Spark), which the wrapper's
    param map does not need."""
    probe = type(cls.__name__, (cls,), {"_new_jvm_stage": lambda self: None})
    stage = probe()
    return {p.name: stage.getOrDefault(p) for p in stage.params if stage.hasDefault(p)}


def _param_type(cls: type, name: str) -> str:
    """The param's declared type (`Param[int]` gives `int`), from the class that declares it."""
    for klass in cls.__mro__:
        annotation = klass.__dict__.get("__annotations__", {}).get(name)
        if annotation is not None:
            text = annotation if isinstance(annotation, str) else repr(annotation)
            text = text.strip("'\"")  # under `from __future__ import annotations`, quoted twice
            found = re.fullmatch(r"Param\[(.*)\]", text)
            return found.group(1) if found else text
    return "any"


def _kind(cls: type) -> str:
    from pyspark.ml import Estimator, Model, Transformer
    from pyspark.ml.evaluation import Evaluator

    if issubclass(cls, Model):
        return "Model"
    if issubclass(cls, Estimator):
        return "Estimator"
    if issubclass(cls, Evaluator):
        return "Evaluator"
    return "Transformer" if issubclass(cls, Transformer) else "Params"


def describe(area: str, cls: type) -> StageDoc:
    """The stage's page content: its params, with types and defaults, sorted by name."""
    defaults = _defaults(cls)
    params = []
    for param in sorted(_class_params(cls), key=lambda p: p.name):
        default = defaults.get(param.name)
        shown = None if param.name not in defaults else repr(default)
        params.append(ParamDoc(param.name, _param_type(cls, param.name), shown, param.doc))
    return StageDoc(cls, area, _kind(cls), tuple(params))


def _class_params(cls: type) -> list[Any]:
    """The Param objects the class declares, its mixins' included (pyspark's `Params.params`
    reads them off the class)."""
    from pyspark.ml.param import Param

    seen = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, Param):
                seen[name] = value
    return list(seen.values())


def stages() -> list[StageDoc]:
    from mmlspark.core.backend import get_backend, set_backend

    previous = get_backend()
    set_backend("jvm")  # no backend probe: nothing runs, and no Spark is started
    try:
        return [describe(area, cls) for area, cls in stage_classes()]
    finally:
        set_backend(previous)


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def _docstring(cls: type) -> str:
    """The class docstring as Markdown: its prose, then its example as a console block. A
    hand-written class's docstring is followed by its generated base's, whose 'Parameters'
    section the table below says again with types, so only the generated opening is kept where
    there is nothing else."""
    raw = cls.__doc__ or ""
    if not raw.startswith("The JVM "):
        raw = raw.split("\nThe JVM ")[0]
    doc = re.split(r"\n(?=Parameters\n-{3,})", inspect.cleandoc(raw))[0].strip()
    parts = re.split(r"\nExamples?\n-{3,}\n", doc)
    text = _rst_to_md(parts[0].strip())
    if len(parts) > 1:
        example = re.sub(r"\s*# doctest: \+SKIP", "", parts[1].strip())
        text += "\n\n**Example**\n\n```pycon\n" + example + "\n```"
    return text


def _rst_to_md(text: str) -> str:
    text = re.sub(r":(?:meth|func|class|attr):`~?([^`]+)`", r"`\1`", text)
    return text.replace("``", "`")


def page(stage: StageDoc) -> str:
    cls = stage.cls
    lines = [
        f"# {stage.name}",
        "",
        f"`from mmlspark.{stage.area} import {stage.name}` · {stage.kind} · "
        f"JVM class `{cls._java_class_name}` · "  # type: ignore[attr-defined]
        f"Python backend: {'yes' if getattr(cls, '_python_backend', False) else 'no'}",
        "",
        _docstring(cls),
        "",
        "## Params",
        "",
    ]
    if not stage.params:
        lines.append("This stage has no params.")
    else:
        lines += ["| param | type | default | meaning |", "|---|---|---|---|"]
        for p in stage.params:
            default = "(none)" if p.default is None else f"`{_cell(p.default)}`"
            lines.append(f"| `{p.name}` | `{p.type}` | {default} | {_cell(p.doc)} |")
    return "\n".join(lines) + "\n"


def index(found: list[StageDoc]) -> str:
    lines = [
        "# API reference",
        "",
        "Every public stage of the `mmlspark` Python package, generated from the wrappers at",
        "build time: the class docstring and every param with its type, default and meaning.",
        "Functions and helpers (`mmlspark.session`, `read_images`, `inspect_model`, ...) are",
        "described in the guides.",
        "",
    ]
    for area in sorted({s.area for s in found}):
        lines += [f"## mmlspark.{area}", "", "| stage | kind | summary |", "|---|---|---|"]
        for s in (s for s in found if s.area == area):
            opening = " ".join(inspect.cleandoc(s.cls.__doc__ or "").split("\n\n")[0].split())
            summary = _rst_to_md(re.split(r"(?<=\.) ", opening)[0])
            lines.append(f"| [{s.name}]({s.area}/{s.name}.md) | {s.kind} | {_cell(summary)} |")
        lines.append("")
    return "\n".join(lines)


def pages() -> dict[str, str]:
    """Every API page by its path inside the site, the index included."""
    found = stages()
    out = {s.page: page(s) for s in found}
    out["api/index.md"] = index(found)
    return out


def main() -> None:
    out = Path(sys.argv[1] if len(sys.argv) > 1 else ROOT / "build" / "docs-api")
    for path, text in pages().items():
        target = out / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    print(f"{len(pages())} pages in {out}")


if __name__ == "__main__":
    main()
