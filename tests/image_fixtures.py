"""Image files made in code for the image tests: every format and failure the reader must handle."""

from __future__ import annotations

import io
import struct
from pathlib import Path

import cv2
import numpy as np
from PIL import Image


def pattern(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    """A smooth image with noise: exercises interpolation and survives JPEG recognisably."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    base = np.stack(
        [(x * 255 // max(width - 1, 1)), (y * 255 // max(height - 1, 1)), (x + y) % 256], -1
    )
    noisy = base[..., :channels] + rng.integers(-20, 21, (height, width, channels))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def encode(image: np.ndarray, ext: str, params: list[int] | None = None) -> bytes:
    ok, buffer = cv2.imencode(ext, image, params or [])
    assert ok, ext
    return buffer.tobytes()


def with_exif_orientation(jpeg: bytes, orientation: int) -> bytes:
    """Inserts an APP1 EXIF block holding only the orientation tag, right after SOI."""
    tiff = b"II*\x00" + struct.pack("<I", 8)  # little-endian TIFF header, IFD0 at offset 8
    ifd = struct.pack("<H", 1) + struct.pack("<HHIHH", 0x0112, 3, 1, orientation, 0) + b"\0\0\0\0"
    payload = b"Exif\x00\x00" + tiff + ifd
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + app1 + jpeg[2:]


def cmyk_jpeg(image_bgr: np.ndarray) -> bytes:
    out = io.BytesIO()
    Image.fromarray(image_bgr[..., ::-1].copy(), "RGB").convert("CMYK").save(
        out, "JPEG", quality=95
    )
    return out.getvalue()


def write_all(folder: Path, large: bool = True) -> dict[str, bytes]:
    """Writes every fixture into ``folder``; returns their bytes by file name."""
    color = pattern(48, 64)
    files = {
        "color.jpg": encode(color, ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90]),
        "color.png": encode(color, ".png"),
        "color.bmp": encode(color, ".bmp"),
        "color.tiff": encode(color, ".tiff"),
        "color.webp": encode(color, ".webp", [cv2.IMWRITE_WEBP_QUALITY, 90]),
        "gray.png": encode(pattern(40, 30, 1)[..., 0], ".png"),
        "deep16.png": encode((pattern(20, 24).astype(np.uint16) * 257), ".png"),
        "alpha.png": encode(np.dstack([color, pattern(48, 64, 1, seed=3)]), ".png"),
        "cmyk.jpg": cmyk_jpeg(color),
        "rotated6.jpg": with_exif_orientation(encode(color, ".jpg"), 6),
        "rotated3.jpg": with_exif_orientation(encode(color, ".jpg"), 3),
        "truncated.jpg": encode(color, ".jpg")[:600],
        "empty.jpg": b"",
        "notes.jpg": b"field notes: camera 7 battery low\n",
    }
    if large:
        files["large.jpg"] = encode(
            pattern(6000, 8000, seed=1), ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 80]
        )
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)
    return files


BAD = {
    "truncated.jpg": "truncated JPEG",
    "empty.jpg": "empty file (0 bytes)",
    "notes.jpg": "not a decodable image",
}


def with_exif_datetime(jpeg: bytes, taken: str) -> bytes:
    """Inserts an APP1 EXIF block whose EXIF sub-IFD holds only DateTimeOriginal (0x9003), as
    cameras write it ("2024:05:01 10:00:00"), right after SOI."""
    value = taken.encode("ascii") + b"\0"
    assert len(value) == 20
    tiff = b"II*\x00" + struct.pack("<I", 8)
    ifd0 = struct.pack("<H", 1) + struct.pack("<HHII", 0x8769, 4, 1, 26) + b"\0\0\0\0"
    sub = struct.pack("<H", 1) + struct.pack("<HHII", 0x9003, 2, 20, 44) + b"\0\0\0\0"
    payload = b"Exif\x00\x00" + tiff + ifd0 + sub + value
    app1 = b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + app1 + jpeg[2:]
