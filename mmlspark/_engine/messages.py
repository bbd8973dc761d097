"""The messages of rows that cannot be read, decoded or transformed, filled in from the JVM's
templates (``_RowMessages``, which codegen writes from ``mmlspark.pixels.RowMessages``), so that
both backends give the same words."""

from __future__ import annotations

import re
from typing import Any

from mmlspark._engine._RowMessages import TEMPLATES
from mmlspark._engine.java import megabytes, megapixels

_PLACEHOLDER = re.compile(r"\{(\w+)(?::(mp|mb))?\}")


def row_message(key: str, /, **values: Any) -> str:
    """The message `key` with `values` filled in as the JVM fills them (``RowMessage.render``)."""
    template = TEMPLATES[key]

    def fill(match: re.Match[str]) -> str:
        name, unit = match.group(1), match.group(2)
        if name not in values:
            raise ValueError(f"no value for {{{name}}} in '{template}'")
        value = values[name]
        if unit == "mp":
            return megapixels(int(value))
        if unit == "mb":
            return megabytes(int(value))
        return str(value)

    return _PLACEHOLDER.sub(fill, template)
