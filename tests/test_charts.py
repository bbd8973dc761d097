"""The camera-trap charts drawn in Python (``mmlspark/apps/camera_trap/_charts.py``): the PNGs are
decoded again with OpenCV and their pixels checked where the layout puts each part. No Spark."""

from __future__ import annotations

import math
from pathlib import Path

import cv2
import numpy as np
import pytest
from image_fixtures import encode, with_exif_orientation

from mmlspark.apps.camera_trap import _charts
from mmlspark.apps.camera_trap._charts import (
    CAPTION_HEIGHT,
    draw_confusion_matrix,
    draw_image_grid,
    grid_layout,
    matrix_layout,
    read_local,
)

RED, GREEN, BLUE = (0, 0, 255), (0, 255, 0), (255, 0, 0)
WHITE, GREY = (255, 255, 255), (128, 128, 128)


def _read_png(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    img = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    assert img is not None and img.dtype == np.uint8 and img.ndim == 3 and img.shape[2] == 3
    return img


def _solid(height: int, width: int, colour: tuple[int, int, int], ext: str = ".png") -> bytes:
    return encode(np.full((height, width, 3), colour, np.uint8), ext)


def _close(pixel: np.ndarray, colour: tuple[int, int, int], tolerance: int = 6) -> bool:
    return bool(np.all(np.abs(pixel.astype(int) - colour) <= tolerance))


# ---------------------------------------------------------------------------------------------
# Confusion matrix


def test_matrix_picture_grows_one_cell_per_label(tmp_path: Path) -> None:
    shapes = {}
    for n in (1, 2, 5):
        labels = [f"class{k}" for k in range(n)]
        path = tmp_path / f"m{n}.png"
        draw_confusion_matrix(labels=labels, matrix=[[1] * n] * n, path=str(path))
        img = _read_png(path)
        layout = matrix_layout(n)
        assert img.shape[:2] == (layout.height, layout.width)
        shapes[n] = img.shape[:2]
        cells = [c for row in layout.cells for c in row]
        assert len(cells) == n * n
        assert all(c.x + c.w <= layout.width and c.y + c.h <= layout.height for c in cells)
        # Cells of one row share a top, of one column a left, and never overlap.
        assert all(len({c.y for c in row}) == 1 for row in layout.cells)
        assert all(len({layout.cells[i][j].x for i in range(n)}) == 1 for j in range(n))
        xs = sorted(c.x for c in layout.cells[0])
        assert all(b - a >= layout.cells[0][0].w for a, b in zip(xs, xs[1:], strict=False))
    pitch = (shapes[5][1] - shapes[2][1]) / 3
    assert pitch >= 40  # room for a count
    assert shapes[5][1] - shapes[1][1] == 4 * pitch
    assert shapes[5][0] - shapes[2][0] == shapes[5][1] - shapes[2][1]  # square matrix part


def test_matrix_cells_are_shaded_by_their_share_of_the_row(tmp_path: Path) -> None:
    path = tmp_path / "cm.png"
    counts = [[90, 10, 0], [0, 5, 5], [0, 0, 0]]
    draw_confusion_matrix(labels=["deer", "fox", "empty"], matrix=counts, path=str(path))
    img = _read_png(path)
    cells = matrix_layout(3).cells

    def shade(i: int, j: int) -> np.ndarray:
        # The band above the centred count, inside the cell's outline.
        c = cells[i][j]
        band = img[c.y + 3 : c.y + c.h // 2 - 12, c.x + 3 : c.x + c.w - 3].reshape(-1, 3)
        assert np.ptp(band, axis=0).max() <= 1, "a cell is one flat colour"
        return band.mean(axis=0)

    def saturation(i: int, j: int) -> float:
        pixel = np.uint8([[shade(i, j).round()]])
        return float(cv2.cvtColor(pixel, cv2.COLOR_BGR2HSV)[0, 0, 1])

    for i, j in [(0, 2), (1, 0), (2, 0), (2, 1), (2, 2)]:  # no share (an empty row has none)
        assert _close(shade(i, j), WHITE, 1), (i, j)
        assert saturation(i, j) == 0
    assert shade(0, 0).sum() < shade(0, 1).sum() < shade(0, 2).sum()
    assert saturation(0, 0) > saturation(0, 1) > saturation(0, 2)
    assert np.allclose(shade(1, 1), shade(1, 2), atol=1)
    assert shade(1, 1).sum() < shade(1, 0).sum()
    blue, green, red = shade(0, 0)
    assert blue > 200 and green < 120 and red < 80  # a dark blue, in BGR

    def middle(i: int, j: int) -> np.ndarray:
        c = cells[i][j]
        return img[c.y + c.h // 2 - 10 : c.y + c.h // 2 + 10, c.x + 3 : c.x + c.w - 3]

    assert (middle(0, 0).min(axis=-1) > 200).sum() > 10  # its count, light on dark
    assert (middle(0, 1).max(axis=-1) < 128).sum() > 10  # and dark on light
    assert (middle(2, 2).max(axis=-1) < 128).sum() > 10  # "0" is written too
    assert (middle(2, 2).max(axis=-1) < 128).sum() < (middle(0, 1).max(axis=-1) < 128).sum()


def test_matrix_labels_are_written_in_the_margins(tmp_path: Path) -> None:
    path = tmp_path / "cm.png"
    labels = ["a_rather_long_species_name_that_cannot_fit", "fox"]
    draw_confusion_matrix(labels=labels, matrix=[[1, 0], [0, 1]], path=str(path))
    img = _read_png(path)
    cells = matrix_layout(2).cells
    dark = np.all(img < 100, axis=-1)
    row = cells[0][0]
    assert dark[row.y : row.y + row.h, : row.x].any()  # row label left of the first row
    assert dark[: cells[0][0].y, cells[0][0].x :].any()  # column labels above
    # A long label is cut short instead of running over the cells or off the picture.
    assert not dark[row.y + 3 : row.y + row.h - 3, row.x - 2 : row.x].any()
    assert not dark[:, -2:].any()


def test_matrix_rejects_a_matrix_that_does_not_match_the_labels(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="must be 2 x 2"):
        draw_confusion_matrix(labels=["a", "b"], matrix=[[1, 2]], path=str(tmp_path / "x.png"))
    with pytest.raises(ValueError, match="counts"):
        draw_confusion_matrix(labels=["a"], matrix=[[-1]], path=str(tmp_path / "x.png"))
    assert not list(tmp_path.iterdir())


def test_matrix_is_written_whole_into_new_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "cm.png"
    draw_confusion_matrix(labels=["x"], matrix=[[3]], path=str(path))
    assert _read_png(path).shape[:2] == (matrix_layout(1).height, matrix_layout(1).width)
    assert [p.name for p in path.parent.iterdir()] == ["cm.png"]  # no temporary file left
    draw_confusion_matrix(labels=["x", "y"], matrix=[[3, 0], [0, 1]], path=str(path))
    assert _read_png(path).shape[1] == matrix_layout(2).width  # replaced
    assert [p.name for p in path.parent.iterdir()] == ["cm.png"]


# ---------------------------------------------------------------------------------------------
# Image grid


def test_grid_has_a_row_of_cells_per_columns_photos(tmp_path: Path) -> None:
    photos = {f"p{k}": _solid(40, 40, GREEN) for k in range(5)}
    for columns, cell in [(2, 64), (4, 100), (5, 32), (8, 48)]:
        path = tmp_path / f"g{columns}.png"
        samples = [{"path": p, "caption": p} for p in photos]
        draw_image_grid(
            samples=samples, columns=columns, cell_size=cell, path=str(path), read=photos.get
        )
        img = _read_png(path)
        rows = math.ceil(5 / columns)
        assert img.shape[:2] == (rows * (cell + CAPTION_HEIGHT), columns * cell)
        layout = grid_layout(5, columns, cell)
        for k, c in enumerate(layout.cells):
            assert (c.x, c.y, c.w, c.h) == (
                (k % columns) * cell,
                (k // columns) * (cell + CAPTION_HEIGHT),
                cell,
                cell,
            )
            assert _close(img[c.y + c.h // 2, c.x + c.w // 2], GREEN)
        # Cells past the last photo stay white.
        for k in range(5, rows * columns):
            x, y = (k % columns) * cell, (k // columns) * (cell + CAPTION_HEIGHT)
            assert (img[y : y + cell, x : x + cell] == 255).all()


def test_grid_puts_each_photo_in_its_cell_and_its_caption_under_it(tmp_path: Path) -> None:
    photos = {"red": _solid(120, 120, RED), "blue": _solid(50, 50, BLUE, ".jpg")}
    samples = [{"path": "red", "caption": "deer"}, {"path": "blue", "caption": "fox (true deer)"}]
    path = tmp_path / "grid.png"
    draw_image_grid(samples=samples, columns=2, cell_size=80, path=str(path), read=photos.get)
    img = _read_png(path)
    layout = grid_layout(2, 2, 80)
    for c, strip, colour in zip(layout.cells, layout.captions, (RED, BLUE), strict=True):
        tile = img[c.y : c.y + c.h, c.x : c.x + c.w].reshape(-1, 3)
        share = np.all(np.abs(tile.astype(int) - colour) <= 12, axis=-1).mean()
        assert share > 0.99  # a square photo fills its square cell
        caption = img[strip.y : strip.y + strip.h, strip.x : strip.x + strip.w]
        assert (caption < 100).all(axis=-1).sum() > 20  # dark text under the photo


def test_grid_keeps_a_photos_aspect_ratio_and_places_its_boxes(tmp_path: Path) -> None:
    # 200 wide, 100 high in a 100-pixel cell: shown 100 x 50, from row 25 of the cell.
    photos = {"wide": _solid(100, 200, BLUE), "square": _solid(200, 200, BLUE)}
    samples = [
        {"path": "wide", "caption": "", "boxes": [{"bbox": [0, 0, 1, 1], "label": ""}]},
        {"path": "square", "caption": "", "boxes": [{"bbox": [0.2, 0.4, 0.5, 0.3]}]},
        {"path": "wide", "caption": "", "boxes": [{"bbox": [0.5, 0.2, 0.25, 0.4]}]},
    ]
    path = tmp_path / "boxes.png"
    draw_image_grid(samples=samples, columns=3, cell_size=100, path=str(path), read=photos.get)
    img = _read_png(path)
    wide = img[0:100, 0:100]
    assert (wide[:22] == 255).all() and (wide[78:] == 255).all()  # white above and below
    assert _close(wide[50, 50], BLUE)
    red = np.all(np.abs(wide.astype(int) - (40, 40, 230)) <= 30, axis=-1)
    assert red[25, 10:90].all() and red[74, 10:90].all()  # the box is the photo's outline
    assert red[30:70, 0].all() and red[30:70, 99].all()
    assert not red[30:70, 3:97].any()

    # A box at fractions of a photo that fills its cell: x 20..69, y 40..69.
    square = img[0:100, 100:200]
    red = np.all(np.abs(square.astype(int) - (40, 40, 230)) <= 30, axis=-1)
    assert red[45:65, 20].all() and red[45:65, 69].all()
    assert red[40, 25:65].all() and red[69, 25:65].all()
    assert not red[42:68, 23:67].any() and _close(square[55, 45], BLUE)
    assert not red[:37].any() and not red[72:].any()
    assert not red[:, :17].any() and not red[:, 72:].any()

    # Fractions of a wide photo's own width and height: x 50..74, y 25 + 10..25 + 29.
    inner = img[0:100, 200:300]
    red = np.all(np.abs(inner.astype(int) - (40, 40, 230)) <= 30, axis=-1)
    assert red[35, 53:72].all() and red[54, 53:72].all()
    assert red[38:52, 50].all() and red[38:52, 74].all()
    assert not red[:32].any() and not red[57:].any() and not red[37:53, 53:72].any()


def test_box_labels_are_drawn_and_bad_boxes_are_skipped(tmp_path: Path) -> None:
    photos = {"p": _solid(100, 100, GREEN)}
    boxes = [
        {"bbox": [0.3, 0.5, 0.4, 0.4], "label": "deer 0.93"},
        {"bbox": "nonsense", "label": "x"},
        {"bbox": [0.1, float("nan"), 0.2, 0.2], "label": "x"},
        {"label": "no bbox"},
    ]
    path = tmp_path / "labels.png"
    samples = [{"path": "p", "caption": "c", "boxes": boxes}]
    draw_image_grid(samples=samples, columns=1, cell_size=100, path=str(path), read=photos.get)
    img = _read_png(path)[:100]
    red = np.all(np.abs(img.astype(int) - (40, 40, 230)) <= 30, axis=-1)
    tab = red[38:50, 30:70]  # the label's tab sits on the box's top edge (row 50)
    assert tab.mean() > 0.5
    assert (img[38:50, 30:70] > 200).all(axis=-1).any()  # with light text on it
    assert not red[:36].any() and not red[:, :28].any()  # nothing from the bad boxes


def test_unreadable_photos_are_grey_cells_and_never_fail(tmp_path: Path) -> None:
    good = tmp_path / "good.png"
    good.write_bytes(_solid(30, 30, GREEN))
    garbage = tmp_path / "garbage.jpg"
    garbage.write_bytes(b"\xff\xd8\xff\xe0 not really a jpeg" * 10)
    empty = tmp_path / "empty.png"
    empty.write_bytes(b"")
    samples = [
        {"path": str(tmp_path / "missing.jpg"), "caption": "missing"},
        {"path": str(garbage), "caption": "garbage"},
        {"path": str(empty), "caption": "empty", "boxes": [{"bbox": [0, 0, 1, 1], "label": "a"}]},
        {"path": f"file:{good}", "caption": "good"},
        {"path": "s3a://bucket/a.jpg", "caption": "elsewhere"},
    ]
    path = tmp_path / "out" / "grid.png"
    draw_image_grid(samples=samples, columns=3, cell_size=64, path=str(path))
    img = _read_png(path)
    layout = grid_layout(5, 3, 64)
    for k in (0, 1, 2, 4):
        c = layout.cells[k]
        tile = img[c.y : c.y + c.h, c.x : c.x + c.w]
        assert (tile[:20] == GREY).all() and (tile[-20:] == GREY).all(), k
        assert (tile[24:40] > 200).all(axis=-1).any(), k  # "unreadable" written across it
    c = layout.cells[3]
    assert _close(img[c.y + 32, c.x + 32], GREEN)

    def failing(_: str) -> bytes | None:
        raise OSError("the store is down")

    draw_image_grid(samples=samples[:1], columns=1, cell_size=32, path=str(path), read=failing)
    assert (_read_png(path)[:10, :32] == GREY).all()


def test_grid_rejects_nothing_to_draw(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="1 or more photos"):
        draw_image_grid(samples=[], columns=4, cell_size=64, path=str(tmp_path / "g.png"))
    with pytest.raises(ValueError, match="columns"):
        sample = {"path": "a", "caption": "a"}
        draw_image_grid(samples=[sample], columns=0, cell_size=64, path=str(tmp_path / "g.png"))
    assert not list(tmp_path.iterdir())


def test_photos_are_decoded_at_the_smallest_scale_that_covers_the_cell(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    flags: list[int] = []
    imdecode = cv2.imdecode

    def recording(buffer: np.ndarray, flag: int) -> np.ndarray | None:
        flags.append(flag)
        return imdecode(buffer, flag)

    monkeypatch.setattr(cv2, "imdecode", recording)
    r8, r4, r2, full = (
        cv2.IMREAD_REDUCED_COLOR_8,
        cv2.IMREAD_REDUCED_COLOR_4,
        cv2.IMREAD_REDUCED_COLOR_2,
        cv2.IMREAD_COLOR,
    )
    cases = [
        ((1200, 1600), 128, [r8]),  # 200 px at 1/8
        ((300, 400), 128, [r8, r2]),  # 50 at 1/8: 1/4 would give 100, so 1/2 (200)
        ((300, 400), 100, [r8, r4]),  # 1/4 gives 100, just enough
        ((90, 100), 128, [r8, full]),  # smaller than the cell: whole
    ]
    for (height, width), cell, expected in cases:
        flags.clear()
        photos = {"p": _solid(height, width, RED, ".jpg")}
        draw_image_grid(
            samples=[{"path": "p", "caption": ""}],
            columns=1,
            cell_size=cell,
            path=str(tmp_path / "g.png"),
            read=photos.get,
        )
        assert flags == expected, (height, width, cell)
        img = _read_png(tmp_path / "g.png")
        shown = _charts.fitted_photo(height, width, cell)
        assert _close(img[shown.y + shown.h // 2, shown.x + shown.w // 2], RED, 12)


def test_exif_orientation_is_applied(tmp_path: Path) -> None:
    # Stored 400 wide x 200 high, left half red and right half blue; orientation 6 shows it
    # turned a quarter clockwise: 200 wide x 400 high, red on top.
    stored = np.zeros((200, 400, 3), np.uint8)
    stored[:, :200], stored[:, 200:] = RED, BLUE
    photos = {"p": with_exif_orientation(encode(stored, ".jpg"), 6)}
    path = tmp_path / "g.png"
    samples = [{"path": "p", "caption": ""}]
    draw_image_grid(samples=samples, columns=1, cell_size=100, path=str(path), read=photos.get)
    tile = _read_png(path)[:100]
    assert (tile[:, :23] == 255).all() and (tile[:, 77:] == 255).all()  # 50 wide, centred
    assert _close(tile[20, 50], RED, 12) and _close(tile[80, 50], BLUE, 12)


def test_read_local_takes_paths_and_file_uris(tmp_path: Path) -> None:
    photo = tmp_path / "a b%.png"
    photo.write_bytes(b"bytes")
    encoded = str(tmp_path / "a%20b%25.png")
    assert read_local(str(photo)) == b"bytes"
    assert read_local(f"file:{photo}") == b"bytes"
    assert read_local(f"file://{photo}") == b"bytes"
    assert read_local(f"file://localhost{photo}") == b"bytes"
    assert read_local(f"file:{encoded}") == b"bytes"  # as Spark lists it
    assert read_local(encoded) == b"bytes"
    assert read_local(f"file://otherhost{photo}") is None
    assert read_local(str(tmp_path / "missing.png")) is None
    assert read_local(str(tmp_path)) is None  # a folder
