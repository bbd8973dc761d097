"""The camera-trap job's report pictures drawn in Python, on the driver, with opencv-python and
numpy: for sessions without the mmlspark jar (Spark Connect, the Python backend), in place of the
JVM's ``mmlspark.apps.cameratrap.Charts`` (``_jvm.py``). The arguments are ``_jvm.py``'s, less the
session, so the job can call either.

The pictures follow the JVM's layout, not its pixels: a confusion matrix of shaded cells with their
counts, and a grid of captioned photos with their boxes. Where they differ it is for legibility:
labels are shortened to the width they have (ending in ``..``) instead of to a character count,
column labels alternate between two lines so that each has two cells' width, a photo keeps its
aspect ratio inside its square cell (the JVM stretches it), and an unreadable photo's grey cell
says so. Text uses only OpenCV's Hershey fonts, which draw ASCII; other characters show as ``?``.
"""

from __future__ import annotations

import math
import os
import uuid
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

_WHITE = (255, 255, 255)
_BLACK = (0, 0, 0)
_GREY = (128, 128, 128)  # an unreadable photo's cell, as the JVM draws it
_RULE = (215, 215, 215)  # the outline of a matrix cell, so that empty cells show as cells
_RED = (40, 40, 230)  # BGR, as everywhere in OpenCV
# Decode scales, smallest first, with their flags (EXIF orientation is applied by default).
_SCALES = (
    (8, "IMREAD_REDUCED_COLOR_8"),
    (4, "IMREAD_REDUCED_COLOR_4"),
    (2, "IMREAD_REDUCED_COLOR_2"),
    (1, "IMREAD_COLOR"),
)

# Confusion matrix, in pixels: each cell's pitch (it is drawn 2 smaller, leaving a white
# line), the row labels' column, the header (title and two staggered lines of column labels)
# and the free edge right and below.
MATRIX_CELL = 70
MATRIX_LEFT = 140
MATRIX_TOP = 62
MATRIX_EDGE = 10
# Image grid: the strip under each photo that holds its caption.
CAPTION_HEIGHT = 22


class Rect(NamedTuple):
    """A rectangle of pixels: left column, top row, width and height."""

    x: int
    y: int
    w: int
    h: int


class MatrixLayout(NamedTuple):
    """Where a confusion matrix's parts go: the picture's size and ``cells[i][j]``, the cell of
    true class ``i`` predicted as class ``j``."""

    width: int
    height: int
    cells: list[list[Rect]]


class GridLayout(NamedTuple):
    """Where an image grid's parts go: the picture's size, each sample's square photo cell and
    the caption strip under it, in the order of the samples (row by row)."""

    width: int
    height: int
    cells: list[Rect]
    captions: list[Rect]


def matrix_layout(count: int) -> MatrixLayout:
    """The layout of a confusion matrix of ``count`` classes: ``MATRIX_CELL`` pixels per class
    in each direction, after the ``MATRIX_LEFT`` label column and the ``MATRIX_TOP`` header.

    >>> layout = matrix_layout(2)
    >>> (layout.width, layout.height), layout.cells[1][0]
    ((290, 212), Rect(x=140, y=132, w=68, h=68))
    """
    if count < 0:
        raise ValueError(f"a confusion matrix has 0 or more classes, not {count}")
    side, inner = MATRIX_CELL * count + MATRIX_EDGE, MATRIX_CELL - 2
    cells = [
        [
            Rect(MATRIX_LEFT + j * MATRIX_CELL, MATRIX_TOP + i * MATRIX_CELL, inner, inner)
            for j in range(count)
        ]
        for i in range(count)
    ]
    return MatrixLayout(MATRIX_LEFT + side, MATRIX_TOP + side, cells)


def grid_layout(count: int, columns: int, cell_size: int) -> GridLayout:
    """The layout of an image grid of ``count`` photos: ``columns`` wide, as many rows as it
    takes, each photo in a ``cell_size`` square with a ``CAPTION_HEIGHT`` strip under it.

    >>> layout = grid_layout(5, 4, 100)
    >>> (layout.width, layout.height), layout.cells[4], layout.captions[4]
    ((400, 244), Rect(x=0, y=122, w=100, h=100), Rect(x=0, y=222, w=100, h=22))
    """
    if count < 1 or columns < 1 or cell_size < 16:
        raise ValueError(
            f"an image grid needs 1 or more photos, 1 or more columns and cells of 16 pixels or "
            f"more, not {count} photos, {columns} columns and {cell_size}-pixel cells"
        )
    pitch = cell_size + CAPTION_HEIGHT
    corners = [((k % columns) * cell_size, (k // columns) * pitch) for k in range(count)]
    return GridLayout(
        columns * cell_size,
        math.ceil(count / columns) * pitch,
        [Rect(x, y, cell_size, cell_size) for x, y in corners],
        [Rect(x, y + cell_size, cell_size, CAPTION_HEIGHT) for x, y in corners],
    )


def fitted_photo(height: int, width: int, cell_size: int) -> Rect:
    """Where a ``height`` x ``width`` photo goes in its ``cell_size`` square cell (relative to the
    cell): scaled to fit whole, aspect ratio kept, centred.

    >>> fitted_photo(300, 400, 100)
    Rect(x=0, y=12, w=100, h=75)
    """
    scale = cell_size / max(height, width, 1)
    w = min(cell_size, max(1, round(width * scale)))
    h = min(cell_size, max(1, round(height * scale)))
    return Rect((cell_size - w) // 2, (cell_size - h) // 2, w, h)


def draw_confusion_matrix(
    *, labels: Sequence[str], matrix: Sequence[Sequence[int]], path: str
) -> None:
    """Writes a confusion matrix as a PNG image to ``path``: rows are the true classes, columns
    the predicted ones, in the order of ``labels``; each cell shows its count, shaded from white
    (none of its row) to dark blue (all of its row).

    >>> draw_confusion_matrix(labels=["deer", "fox"], matrix=[[5, 1], [0, 3]], path=path)
    ... # doctest: +SKIP
    """
    import cv2

    count = len(labels)
    if len(matrix) != count or any(len(row) != count for row in matrix):
        shape = f"{len(matrix)} rows of {sorted({len(row) for row in matrix})} counts"
        raise ValueError(f"the matrix must be {count} x {count} for {count} labels, not {shape}")
    counts = [[int(c) for c in row] for row in matrix]
    if any(c < 0 for row in counts for c in row):
        raise ValueError(f"a confusion matrix holds counts, 0 or more, not {counts}")
    layout = matrix_layout(count)
    img = np.full((layout.height, layout.width, 3), 255, np.uint8)
    _text(cv2, img, "predicted", MATRIX_LEFT, 16, 0.5, _BLACK)
    _text(cv2, img, "true", 4, 16, 0.5, _BLACK)
    for i, label in enumerate(labels):
        # Column labels alternate between two lines, so each has two columns' width, centred on
        # its own column.
        head = layout.cells[0][i]
        column = _fit(cv2, label, 2 * MATRIX_CELL - 8, 0.4)
        x = head.x + (head.w - _width(cv2, column, 0.4)) // 2
        x = max(MATRIX_LEFT, min(x, layout.width - 2 - _width(cv2, column, 0.4)))
        _text(cv2, img, column, x, MATRIX_TOP - (26 if i % 2 == 0 else 8), 0.4, _BLACK)
        first = layout.cells[i][0]
        row = _fit(cv2, label, MATRIX_LEFT - 8, 0.45)
        _text(cv2, img, row, 4, first.y + first.h // 2 + 5, 0.45, _BLACK)
        total = max(1, sum(counts[i]))
        for j, cell in enumerate(layout.cells[i]):
            share = counts[i][j] / total
            shade = (255, round(255 - 200 * share), round(255 - 230 * share))
            corners = (cell.x, cell.y), (cell.x + cell.w - 1, cell.y + cell.h - 1)
            cv2.rectangle(img, *corners, shade, -1)
            cv2.rectangle(img, *corners, _RULE, 1)
            number = str(counts[i][j])
            scale = 0.6
            while scale > 0.3 and _width(cv2, number, scale) > cell.w - 6:
                scale -= 0.05
            _text(
                cv2,
                img,
                number,
                cell.x + (cell.w - _width(cv2, number, scale)) // 2,
                cell.y + cell.h // 2 + 5,
                scale,
                _WHITE if share > 0.5 else _BLACK,
            )
    _write_png(cv2, img, path)


def draw_image_grid(
    *,
    samples: Sequence[dict[str, Any]],
    columns: int,
    cell_size: int,
    path: str,
    read: Callable[[str], bytes | None] | None = None,
) -> None:
    """Writes the photos of ``samples`` as a PNG grid to ``path``: ``columns`` wide, each photo
    fitted whole in a ``cell_size`` square with its caption below and its boxes drawn in red.

    Each sample is ``{"path": ..., "caption": ...}``, optionally with ``"boxes": [{"bbox": [x, y,
    w, h], "label": ...}]``, the box as fractions of the photo. ``read(path)`` gives a photo's
    encoded bytes, or None; by default local files are read (``file:`` URIs or plain paths). A
    photo that cannot be read or decoded is a grey cell saying "unreadable"; it never fails the
    picture. Large photos are decoded at 1/8, 1/4 or 1/2 scale where that still covers the cell.

    >>> draw_image_grid(
    ...     samples=[{"path": "file:/photos/a.jpg", "caption": "deer (true fox)"}],
    ...     columns=4,
    ...     cell_size=128,
    ...     path=path,
    ... )  # doctest: +SKIP
    """
    import cv2

    layout = grid_layout(len(samples), columns, cell_size)
    reader = read if read is not None else read_local
    img = np.full((layout.height, layout.width, 3), 255, np.uint8)
    for sample, cell, strip in zip(samples, layout.cells, layout.captions, strict=True):
        tile = img[cell.y : cell.y + cell.h, cell.x : cell.x + cell.w]
        photo = _decode(cv2, reader, str(sample.get("path", "")), cell_size)
        if photo is None:
            tile[:] = _GREY
            word = "unreadable"
            scale = min(0.5, 0.5 * (cell_size - 8) / _width(cv2, word, 0.5))
            x = (cell_size - _width(cv2, word, scale)) // 2
            _text(cv2, tile, word, x, cell_size // 2 + 4, scale, _WHITE)
        else:
            at = fitted_photo(photo.shape[0], photo.shape[1], cell_size)
            tile[at.y : at.y + at.h, at.x : at.x + at.w] = cv2.resize(
                photo, (at.w, at.h), interpolation=cv2.INTER_AREA
            )
            for box in sample.get("boxes") or ():
                _box(cv2, tile, at, box)
        caption = _fit(cv2, str(sample.get("caption", "")), strip.w - 8, 0.4)
        _text(cv2, img, caption, strip.x + 2, strip.y + 15, 0.4, _BLACK)
    _write_png(cv2, img, path)


def read_local(path: str) -> bytes | None:
    """The bytes of a local file named by a path or a ``file:`` URI (``file:/a``, ``file:///a``,
    ``file://localhost/a``), percent-decoded when the name as given does not exist, or a
    Databricks mount (``dbfs:/...``); None when there is no such file or it cannot be read."""
    from mmlspark.image import read_bytes

    try:
        return read_bytes(path, maxBytes=_MAX_PHOTO_BYTES)
    except ValueError:
        return None


#: The largest photo file the grid reads.
_MAX_PHOTO_BYTES = 1 << 30


def _decode(cv2: Any, read: Callable[[str], bytes | None], path: str, size: int) -> Any:
    """The photo at ``path`` as 8-bit BGR, EXIF orientation applied, at the smallest of 1/8, 1/4,
    1/2 and full scale whose longer side still covers ``size``; None if it cannot be read or
    decoded."""
    try:
        data = read(path)
        if not data:
            return None
        buffer = np.frombuffer(data, np.uint8)
        # The photo's longer side is at most `longest` * `decoded_at`, which tells the scales
        # that cannot cover `size` either, so they are not decoded.
        longest, decoded_at = 0, 1
        for factor, flag in _SCALES:
            if factor > 1 and longest and -(-longest * decoded_at // factor) < size:
                continue
            photo = cv2.imdecode(buffer, getattr(cv2, flag))
            if photo is None or photo.size == 0:
                return None
            longest, decoded_at = max(photo.shape[:2]), factor
            if longest >= size or factor == 1:
                return photo
    except Exception:  # any failure to read or decode one photo makes its cell grey
        return None
    return None


def _box(cv2: Any, tile: np.ndarray, photo: Rect, box: Any) -> None:
    """Draws one box (``{"bbox": [x, y, w, h] as fractions of the photo, "label"}``) on the
    photo at ``photo`` in ``tile``, with its label on a red tab; a malformed box is skipped."""
    try:
        x, y, w, h = (float(v) for v in box["bbox"])
    except (KeyError, TypeError, ValueError):
        return
    if not all(math.isfinite(v) for v in (x, y, w, h)):
        return
    left = photo.x + round(x * photo.w)
    top = photo.y + round(y * photo.h)
    right = photo.x + round((x + w) * photo.w) - 1
    bottom = photo.y + round((y + h) * photo.h) - 1
    cv2.rectangle(tile, (left, top), (right, bottom), _RED, 2)
    label = _fit(cv2, str(box.get("label") or ""), tile.shape[1] - 4, 0.35)
    if label:
        tab_top = max(0, min(top, tile.shape[0]) - 12)
        tab_left = max(0, min(left, tile.shape[1] - _width(cv2, label, 0.35) - 4))
        width = _width(cv2, label, 0.35) + 4
        cv2.rectangle(tile, (tab_left, tab_top), (tab_left + width, tab_top + 11), _RED, -1)
        _text(cv2, tile, label, tab_left + 2, tab_top + 9, 0.35, _WHITE)


def _ascii(text: str) -> str:
    # The Hershey fonts draw printable ASCII only.
    return "".join(c if " " <= c <= "~" else "?" for c in text)


def _width(cv2: Any, text: str, scale: float) -> int:
    (width, _), _ = cv2.getTextSize(text, cv2.FONT_HERSHEY_SIMPLEX, scale, 1)
    return int(width)


def _fit(cv2: Any, text: str, width: int, scale: float) -> str:
    """``text`` in ASCII, shortened to end in ``..`` where it is wider than ``width`` pixels."""
    text = _ascii(text)
    if _width(cv2, text, scale) <= width:
        return text
    fits, too_long = 0, len(text)  # prefix lengths: the longest known to fit, one known not to
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if _width(cv2, text[:middle] + "..", scale) <= width:
            fits = middle
        else:
            too_long = middle
    return text[:fits] + ".." if fits else ""


def _text(cv2: Any, img: np.ndarray, text: str, x: int, y: int, scale: float, colour: Any) -> None:
    if text:
        cv2.putText(img, text, (x, y), cv2.FONT_HERSHEY_SIMPLEX, scale, colour, 1, cv2.LINE_AA)


def _write_png(cv2: Any, img: np.ndarray, path: str) -> None:
    """Encodes ``img`` as PNG and writes it to ``path`` through a temporary file in the same
    folder and a rename, so that ``path`` holds a whole picture or none; folders are created."""
    ok, encoded = cv2.imencode(".png", img)
    if not ok:
        raise ValueError(f"cannot encode the {img.shape[1]}x{img.shape[0]} picture as PNG")
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    tmp = os.path.join(folder, f".{os.path.basename(path)}.{uuid.uuid4().hex[:8]}.tmp")
    try:
        with open(tmp, "wb") as f:
            f.write(encoded.tobytes())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.remove(tmp)
