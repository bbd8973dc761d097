"""mmlspark/_engine/headers.py, the Python twin of the JVM's ImageHeader and Exif readers.

Pure Python (no Spark). Sizes are checked against what OpenCV decodes, and hand-made headers and
EXIF blocks against the values written into them.
"""

from __future__ import annotations

import ast
import importlib.util
import io
import struct
import sys
from pathlib import Path
from types import ModuleType

import cv2
import numpy as np
import pytest

MODULE = Path(__file__).resolve().parent.parent / "mmlspark" / "_engine" / "headers.py"


def _load() -> ModuleType:
    # Loaded from its file, as Spark workers get it (by value), without the mmlspark package.
    spec = importlib.util.spec_from_file_location("_mmlspark_engine_headers", MODULE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


headers = _load()
ImageHeader = headers.ImageHeader
read_header = headers.read_header


def image(height: int, width: int, channels: int = 3, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    shape = (height, width) if channels == 1 else (height, width, channels)
    return rng.integers(0, 256, shape, dtype=np.uint8)


def encode(img: np.ndarray, ext: str, params: list[int] | None = None) -> bytes:
    ok, buffer = cv2.imencode(ext, img, params or [])
    assert ok, ext
    return buffer.tobytes()


def decoded_size(data: bytes) -> tuple[int, int]:
    """(width, height) as OpenCV decodes ``data``."""
    mat = cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_UNCHANGED)
    assert mat is not None
    return mat.shape[1], mat.shape[0]


def sof_offset(jpeg: bytes) -> int:
    """Where the baseline or progressive frame header's FF Cx marker stands."""
    at = [jpeg.find(m) for m in (b"\xff\xc0", b"\xff\xc2")]
    return min(a for a in at if a >= 0)


# --- every format OpenCV writes ----------------------------------------------------------------

FORMATS = [
    # (id, extension, imencode params, channels, format, scalable, RIFF chunk for webp)
    ("jpeg", ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 90], 3, "jpeg", True, None),
    ("jpeg-gray", ".jpg", [], 1, "jpeg", True, None),
    ("jpeg-progressive", ".jpg", [cv2.IMWRITE_JPEG_PROGRESSIVE, 1], 3, "jpeg", True, None),
    ("png", ".png", [], 3, "png", False, None),
    ("png-alpha", ".png", [], 4, "png", False, None),
    ("bmp", ".bmp", [], 3, "bmp", False, None),
    ("webp-lossy", ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80], 3, "webp", False, b"VP8 "),
    ("webp-lossless", ".webp", [cv2.IMWRITE_WEBP_QUALITY, 101], 3, "webp", False, b"VP8L"),
    ("webp-alpha", ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80], 4, "webp", False, b"VP8X"),
    ("tiff", ".tiff", [], 3, "tiff", False, None),
    ("ppm", ".ppm", [], 3, "pnm", False, None),
    ("pgm", ".pgm", [], 1, "pnm", False, None),
    ("pbm", ".pbm", [], 1, "pnm", False, None),
]
SIZES = [(23, 37), (1, 1), (481, 640), (2, 301)]


@pytest.mark.parametrize("height, width", SIZES, ids=[f"{w}x{h}" for h, w in SIZES])
@pytest.mark.parametrize(
    "ext, params, channels, fmt, scalable, chunk",
    [f[1:] for f in FORMATS],
    ids=[f[0] for f in FORMATS],
)
def test_header_gives_the_size_opencv_decodes(
    ext, params, channels, fmt, scalable, chunk, height, width
):
    data = encode(image(height, width, channels), ext, params)
    if chunk is not None:  # the webp flavour meant is the one made
        assert data[12:16] == chunk
    if params and params[0] == cv2.IMWRITE_JPEG_PROGRESSIVE:
        assert b"\xff\xc2" in data and b"\xff\xc0" not in data
    assert decoded_size(data) == (width, height)
    expected = ImageHeader(fmt, width, height, scalable)
    assert read_header(data) == expected
    assert read_header(bytearray(data)) == expected  # PySpark hands binary columns as bytearray
    assert expected.pixels == width * height


def test_pam_is_not_read():
    # P7 passes the Netpbm check but has "WIDTH 37" in place of two bare numbers: the JVM reader
    # gives up on it (the size is then checked after decoding).
    data = encode(image(23, 37), ".pam")
    assert data.startswith(b"P7\nWIDTH 37\n")
    assert decoded_size(data) == (37, 23)
    assert read_header(data) is None


def test_sixteen_bit_png_and_tiff():
    deep = image(23, 37).astype(np.uint16) * 257
    for ext, fmt in ((".png", "png"), (".tiff", "tiff")):
        data = encode(deep, ext)
        assert read_header(data) == ImageHeader(fmt, *decoded_size(data), False)


# --- JPEG ---------------------------------------------------------------------------------------


def test_jpeg_claiming_25000x25000_in_a_tiny_file():
    data = bytearray(encode(image(16, 16), ".jpg"))
    sof = sof_offset(bytes(data))
    data[sof + 5 : sof + 9] = struct.pack(">HH", 25000, 25000)  # height, then width
    assert len(data) < 1000
    header = read_header(bytes(data))
    assert header == ImageHeader("jpeg", 25000, 25000, True)
    assert header.pixels == 625_000_000


def test_jpeg_height_and_width_are_read_from_their_own_fields():
    data = bytearray(encode(image(16, 16), ".jpg"))
    sof = sof_offset(bytes(data))
    data[sof + 5 : sof + 9] = struct.pack(">HH", 7, 65535)
    assert read_header(bytes(data)) == ImageHeader("jpeg", 65535, 7, True)


@pytest.mark.parametrize("sof, scalable", [(0xC1, True), (0xC3, False), (0xCB, False)])
def test_lossless_jpeg_frames_are_not_scalable(sof, scalable):
    data = bytearray(encode(image(23, 37), ".jpg"))
    data[sof_offset(bytes(data)) + 1] = sof
    assert read_header(bytes(data)) == ImageHeader("jpeg", 37, 23, scalable)


def test_truncated_jpeg_header():
    data = encode(image(23, 37), ".jpg")
    sof = sof_offset(data)
    # The size ends at sof + 8: any cut before it is a header cut short.
    for cut in (2, 3, 8, 20, sof, sof + 4, sof + 6, sof + 8):
        assert read_header(data[:cut]) is None, cut
    assert read_header(data[: sof + 9]) == ImageHeader("jpeg", 37, 23, True)


def test_jpeg_without_a_frame_before_its_scan_or_with_garbage_between_segments():
    # SOI, APP0 (length 4), then a scan: no frame header before it.
    assert read_header(b"\xff\xd8\xff\xe0\x00\x04ab\xff\xda\x00\x02\x00\x00") is None
    # SOI, then a byte where a marker should be.
    assert read_header(b"\xff\xd8\x00\xe0\x00\x04ab\xff\xc0\x00\x11\x08\x00\x10\x00\x10") is None


def test_jpeg_fill_bytes_and_restart_markers_are_stepped_over():
    frame = b"\xff\xc0\x00\x11\x08" + struct.pack(">HH", 23, 37) + b"\x03" + bytes(9)
    data = b"\xff\xd8" + b"\xff\xff\xff" + b"\xff\xd3" + b"\xff\xe0\x00\x04ab" + frame
    assert read_header(data) == ImageHeader("jpeg", 37, 23, True)


# --- other formats, made by hand ----------------------------------------------------------------


@pytest.mark.parametrize("version", [b"87a", b"89a"])
def test_gif_header(version):
    data = b"GIF" + version + struct.pack("<HH", 301, 2) + b"\xf7\x00\x00" + bytes(20)
    assert read_header(data) == ImageHeader("gif", 301, 2, False)
    assert read_header(data[:9]) is None  # the height cut in half


def test_gif_written_by_pillow_if_there():
    pil = pytest.importorskip("PIL.Image")
    out = io.BytesIO()
    pil.new("P", (37, 23)).save(out, "GIF")
    assert read_header(out.getvalue()) == ImageHeader("gif", 37, 23, False)


def test_top_down_bmp():
    data = bytearray(encode(image(23, 37), ".bmp"))
    assert struct.unpack_from("<Iii", data, 14) == (40, 37, 23)
    data[22:26] = struct.pack("<i", -23)  # rows stored top first
    assert decoded_size(bytes(data)) == (37, 23)
    assert read_header(bytes(data)) == ImageHeader("bmp", 37, 23, False)


def test_bmp_core_header():
    # 14-byte file header, then the 12-byte BITMAPCOREHEADER: unsigned 16-bit width and height.
    data = (
        b"BM" + struct.pack("<IHHI", 26 + 6, 0, 0, 26) + struct.pack("<IHHHH", 12, 40000, 3, 1, 24)
    )
    assert len(data) == 26
    assert read_header(data) == ImageHeader("bmp", 40000, 3, False)
    assert read_header(data + bytes(6)) == ImageHeader("bmp", 40000, 3, False)
    assert read_header(data[:25]) is None  # under 26 bytes


def test_bmp_sizes_are_signed_32_bit():
    info = b"BM" + bytes(12) + struct.pack("<I", 40)
    data = info + struct.pack("<ii", -(2**31), -1) + bytes(28)
    # |-2^31| does not fit an Int: clamped to Int.MaxValue, like every size.
    assert read_header(data) == ImageHeader("bmp", 2**31 - 1, 1, False)
    data = info + struct.pack("<ii", -37, 23) + bytes(28)
    assert read_header(data) == ImageHeader("bmp", 37, 23, False)


def test_vp8x_webp_header():
    width, height = 20000, 70001  # 24-bit sizes, stored minus one
    chunk = b"VP8X" + struct.pack("<I", 10) + b"\x10\x00\x00\x00"
    chunk += (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    data = b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk
    assert len(data) == 30
    assert read_header(data) == ImageHeader("webp", width, height, False)
    assert read_header(data[:29]) is None


def test_webp_cut_short_or_unknown_chunk():
    lossy = encode(image(23, 37), ".webp", [cv2.IMWRITE_WEBP_QUALITY, 80])
    assert read_header(lossy[:29]) is None
    assert read_header(lossy[:14]) is None
    assert read_header(lossy[:12] + b"ALPH" + lossy[16:]) is None


def tiff_bytes(order: str, entries: list[tuple[int, int, int]], ifd: int = 8) -> bytes:
    """A TIFF whose IFD at ``ifd`` holds ``(tag, type, value)`` entries (type 3: SHORT)."""
    head = (b"II*\x00" if order == "<" else b"MM\x00*") + struct.pack(order + "I", ifd)
    body = struct.pack(order + "H", len(entries))
    for tag, kind, value in entries:
        packed = (
            struct.pack(order + "HH", value, 0) if kind == 3 else struct.pack(order + "I", value)
        )
        body += struct.pack(order + "HHI", tag, kind, 1) + packed
    return head.ljust(ifd, b"\0") + body + bytes(4)


@pytest.mark.parametrize("order", ["<", ">"])
def test_tiff_in_either_byte_order(order):
    data = tiff_bytes(order, [(254, 4, 0), (256, 3, 37), (257, 4, 70000), (258, 3, 8)])
    assert read_header(data) == ImageHeader("tiff", 37, 70000, False)
    # A later IFD, a type other than SHORT (SLONG) read as 32 bits, sizes over Int.MaxValue.
    data = tiff_bytes(order, [(256, 4, 0xFFFFFFFF), (257, 9, 2**31)], ifd=40)
    assert read_header(data) == ImageHeader("tiff", 2**31 - 1, 2**31 - 1, False)


def test_big_endian_tiff_decodes_to_the_header_size():
    little = encode(image(23, 37, 1), ".tiff")
    assert little.startswith(b"II*\x00")
    # A minimal uncompressed big-endian 8-bit gray strip, checked against OpenCV.
    width, height = 37, 23
    pixels = image(height, width, 1).tobytes()
    entries = [(256, 3, width), (257, 3, height), (258, 3, 8), (259, 3, 1), (262, 3, 1)]
    entries += [(273, 4, 0), (277, 3, 1), (278, 3, height), (279, 4, len(pixels))]
    ifd_size = 2 + 12 * len(entries) + 4
    entries[5] = (273, 4, 8 + ifd_size)  # the strip right after the IFD
    data = tiff_bytes(">", entries) + pixels
    assert data.startswith(b"MM\x00*")
    assert decoded_size(data) == (width, height)
    assert read_header(data) == ImageHeader("tiff", width, height, False)


def test_tiff_without_a_size_or_with_offsets_past_the_end():
    assert read_header(tiff_bytes("<", [(256, 3, 37)])) is None  # no height
    entries = [(256, 3, 37), (257, 3, 23)]
    # A SHORT's value is its entry's bytes 8-9: the last two bytes of the entry may be missing.
    assert read_header(tiff_bytes("<", entries)[:-6]) == ImageHeader("tiff", 37, 23, False)
    assert read_header(tiff_bytes("<", entries)[:-7]) is None  # last entry cut short
    assert read_header(tiff_bytes("<", entries, ifd=8)[:8]) is None  # no IFD at all
    assert read_header(b"II*\x00" + struct.pack("<I", 2**31) + bytes(32)) is None


def test_pnm_with_comments():
    width, height = 37, 23
    pixels = image(height, width).tobytes()
    head = b"P6\n# made by hand 99 99\n  37 # the width\n#\n\t23   \n255\n"
    data = head + pixels
    assert decoded_size(data) == (width, height)
    assert read_header(data) == ImageHeader("pnm", width, height, False)
    crlf = head.replace(b"\n", b"\r\n") + pixels
    assert read_header(crlf) == ImageHeader("pnm", width, height, False)
    # A comment ends at a carriage return as at a line feed.
    assert read_header(b"P5 # 1 2\r37 23\n255\n" + bytes(8)) == ImageHeader("pnm", 37, 23, False)


def test_pnm_numbers_must_be_plain_digits():
    assert read_header(b"P5\n37 23\n255\n" + bytes(851)) == ImageHeader("pnm", 37, 23, False)
    assert read_header(b"P5\n999999999 1\n") == ImageHeader("pnm", 999_999_999, 1, False)
    assert read_header(b"P5\n1234567890 1\n") is None  # ten digits
    assert read_header(b"P5\n37 -23\n255\n") is None
    assert read_header(b"P5\n37 \xb23\n255\n") is None  # a superscript two is no digit
    assert read_header(b"P5\n37\x1c23\n255\n") is None  # not whitespace for Java's \s
    assert read_header(b"P5\n37 # 23\n") is None  # one number only
    assert read_header(b"P8\n37 23\n255\n") is None  # not Netpbm


def test_unknown_short_and_random_bytes():
    rng = np.random.default_rng(7)
    for n in (8, 100, 5000):
        noise = b"\0" + rng.integers(0, 256, n, dtype=np.uint8).tobytes()
        assert read_header(noise) is None
    assert read_header(b"not an image at all") is None
    assert read_header(b"") is None
    assert read_header(b"\xff\xd8\xff\xc0") is None  # under 8 bytes
    assert read_header(None) is None  # a null cell
    png = encode(image(23, 37), ".png")
    assert read_header(png[:12]) is None
    assert read_header(png[:24]) == ImageHeader("png", 37, 23, False)


# --- EXIF ---------------------------------------------------------------------------------------


def exif_block(order: str, orientation: int | None, taken: str | None) -> bytes:
    """An APP1 EXIF segment: IFD0 holding the orientation and a pointer to a sub-IFD holding
    DateTimeOriginal ``taken`` (with its NUL, 20 bytes), each when given."""
    entries: list[bytes] = []
    if orientation is not None:
        entries.append(struct.pack(order + "HHIHH", 0x0112, 3, 1, orientation, 0))
    ifd0 = 8
    sub = ifd0 + 2 + 12 * (len(entries) + (taken is not None)) + 4
    if taken is not None:
        entries.append(struct.pack(order + "HHII", 0x8769, 4, 1, sub))
    tiff = (b"II" if order == "<" else b"MM") + struct.pack(order + "HI", 42, ifd0)
    tiff += struct.pack(order + "H", len(entries)) + b"".join(entries) + bytes(4)
    if taken is not None:
        value = taken.encode("ascii") + b"\0"
        assert len(value) == 20
        at = sub + 2 + 12 + 4
        tiff += struct.pack(order + "H", 1) + struct.pack(order + "HHII", 0x9003, 2, 20, at)
        tiff += bytes(4) + value
    payload = b"Exif\0\0" + tiff
    return b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload


def with_segment(jpeg: bytes, segment: bytes) -> bytes:
    assert jpeg[:2] == b"\xff\xd8"
    return jpeg[:2] + segment + jpeg[2:]


@pytest.fixture(scope="module")
def jpeg() -> bytes:
    return encode(image(23, 37), ".jpg")


@pytest.mark.parametrize("order", ["<", ">"], ids=["II", "MM"])
@pytest.mark.parametrize("orientation", range(1, 9))
def test_exif_orientation_and_time_taken(jpeg, order, orientation):
    taken = f"2024:05:0{orientation} 10:00:0{orientation}"
    data = with_segment(jpeg, exif_block(order, orientation, taken))
    assert headers.exif_orientation(data) == orientation
    assert headers.exif_date_time_original(data) == taken
    assert read_header(data) == ImageHeader("jpeg", 37, 23, True)
    assert headers.is_jpeg(data) and headers.has_jpeg_end(data)


@pytest.mark.parametrize("order", ["<", ">"], ids=["II", "MM"])
def test_exif_with_one_tag_only(jpeg, order):
    only_orientation = with_segment(jpeg, exif_block(order, 6, None))
    assert headers.exif_orientation(only_orientation) == 6
    assert headers.exif_date_time_original(only_orientation) is None
    only_time = with_segment(jpeg, exif_block(order, None, "2023:12:31 23:59:59"))
    assert headers.exif_orientation(only_time) == 1
    assert headers.exif_date_time_original(only_time) == "2023:12:31 23:59:59"


def test_exif_head_alone_is_enough():
    # Only the head of a file may be given: SOI and the EXIF block, then a scan.
    head = b"\xff\xd8" + exif_block(">", 8, "2024:05:01 10:00:02") + b"\xff\xda\x00\x02"
    assert headers.exif_orientation(head) == 8
    assert headers.exif_date_time_original(head) == "2024:05:01 10:00:02"


def test_orientation_outside_1_to_8_is_1(jpeg):
    for value in (0, 9, 0xFFFF):
        assert headers.exif_orientation(with_segment(jpeg, exif_block("<", value, None))) == 1


def test_exif_after_another_app1_and_not_after_the_scan(jpeg):
    xmp = b"http://ns.adobe.com/xap/1.0/\0<x/>"
    xmp_segment = b"\xff\xe1" + struct.pack(">H", len(xmp) + 2) + xmp
    data = with_segment(jpeg, xmp_segment + exif_block("<", 3, "2024:01:02 03:04:05"))
    assert headers.exif_orientation(data) == 3
    assert headers.exif_date_time_original(data) == "2024:01:02 03:04:05"
    sos = jpeg.index(b"\xff\xda")
    late = jpeg[:sos] + exif_block("<", 3, "2024:01:02 03:04:05") + jpeg[sos:]
    assert headers.exif_orientation(late) == 3  # still before the scan
    after_scan = b"\xff\xd8\xff\xda\x00\x02" + exif_block("<", 3, "2024:01:02 03:04:05")
    assert headers.exif_orientation(after_scan) == 1


def test_jpeg_without_exif(jpeg):
    assert b"Exif" not in jpeg
    assert headers.exif_orientation(jpeg) == 1
    assert headers.exif_date_time_original(jpeg) is None
    assert headers.exif_orientation(b"") == 1
    assert headers.exif_date_time_original(b"") is None
    assert headers.exif_orientation(b"not a jpeg at all") == 1


def patched(data: bytes, at: int, fmt: str, *values: int) -> bytes:
    out = bytearray(data)
    struct.pack_into(fmt, out, at, *values)
    return bytes(out)


@pytest.mark.parametrize("order", ["<", ">"], ids=["II", "MM"])
def test_corrupt_exif_offsets(jpeg, order):
    segment = exif_block(order, 6, "2024:05:01 10:00:02")
    data = with_segment(jpeg, segment)
    tiff = 2 + 10  # SOI, marker, length, "Exif\0\0"
    u32 = order + "I"
    ifd0 = tiff + 8
    # IFD0 far past the end, and "before the start" (a negative Int offset on the JVM).
    for offset in (0x7FFFFFF0, 0xFFFFFFF0, len(data)):
        bad = patched(data, tiff + 4, u32, offset)
        assert headers.exif_orientation(bad) == 1, hex(offset)
        assert headers.exif_date_time_original(bad) is None, hex(offset)
    # The orientation entry comes first: a broken sub-IFD pointer loses only the time.
    pointer = ifd0 + 2 + 12
    assert struct.unpack_from(order + "H", data, pointer)[0] == 0x8769
    for offset in (0x7FFFFFF0, 0xFFFFFFF0, len(data)):
        bad = patched(data, pointer + 8, u32, offset)
        assert headers.exif_orientation(bad) == 6
        assert headers.exif_date_time_original(bad) is None
    # The time's own offset past the end, its count outside 19-64, its type not ASCII.
    sub = tiff + struct.unpack_from(u32, data, pointer + 8)[0]
    entry = sub + 2
    assert struct.unpack_from(order + "H", data, entry)[0] == 0x9003
    for at, fmt, value in [
        (entry + 8, u32, 0xFFFFFFF0),
        (entry + 8, u32, len(data)),
        (entry + 4, u32, 18),
        (entry + 4, u32, 65),
        (entry + 2, order + "H", 7),
    ]:
        bad = patched(data, at, fmt, value)
        assert headers.exif_date_time_original(bad) is None, (at - entry, value)
        assert headers.exif_orientation(bad) == 6
    # A count of 64 is still taken; the 19 characters are read either way.
    assert headers.exif_date_time_original(patched(data, entry + 4, u32, 64)) == (
        "2024:05:01 10:00:02"
    )


@pytest.mark.parametrize("order", ["<", ">"], ids=["II", "MM"])
def test_exif_offsets_are_signed(order):
    # Offsets are Scala Ints (`u32(...).toInt`): 0xFFFFFFxx points back before the TIFF header.
    # Here an APP2 segment ahead of the EXIF block holds IFD0 and the sub-IFD with the time.
    taken = b"2021:02:03 04:05:06\0"
    ifd0 = struct.pack(order + "H", 2) + struct.pack(order + "HHIHH", 0x0112, 3, 1, 5, 0)
    ifd0 += struct.pack(order + "HHII", 0x8769, 4, 1, 0) + bytes(4)  # pointer filled in below
    sub = struct.pack(order + "H", 1) + struct.pack(order + "HHII", 0x9003, 2, 20, 0) + bytes(4)
    app2 = ifd0 + sub + taken
    at_ifd0 = 2 + 4  # SOI, then the APP2 marker and length
    at_sub = at_ifd0 + len(ifd0)
    at_taken = at_sub + len(sub)
    tiff = 2 + 4 + len(app2) + 10  # then APP1 marker, length and "Exif\0\0"

    def back(to: int) -> bytes:
        assert to < tiff
        return struct.pack(order + "I", (to - tiff) & 0xFFFFFFFF)

    app2 = bytearray(app2)
    app2[len(ifd0) - 8 : len(ifd0) - 4] = back(at_sub)
    app2[len(ifd0) + 10 : len(ifd0) + 14] = back(at_taken)
    payload = b"Exif\0\0" + (b"II" if order == "<" else b"MM")
    payload += struct.pack(order + "H", 42) + back(at_ifd0)
    data = b"\xff\xd8" + b"\xff\xe2" + struct.pack(">H", len(app2) + 2) + bytes(app2)
    data += b"\xff\xe1" + struct.pack(">H", len(payload) + 2) + payload + b"\xff\xda\x00\x02"
    assert data.index(b"Exif") + 6 == tiff
    assert headers.exif_orientation(data) == 5
    assert headers.exif_date_time_original(data) == "2021:02:03 04:05:06"


def test_every_cut_of_an_exif_head_gives_1_or_the_orientation():
    head = b"\xff\xd8" + exif_block("<", 8, "2024:05:01 10:00:02") + b"\xff\xda\x00\x02"
    for n in range(len(head) + 1):
        assert headers.exif_orientation(head[:n]) in (1, 8), n
        assert headers.exif_date_time_original(head[:n]) in (None, "2024:05:01 10:00:02"), n
    assert headers.exif_orientation(head[:24]) == 1  # IFD0 not there yet
    assert headers.exif_date_time_original(head[:-5]) == "2024:05:01 10:00:02"  # NUL cut off
    assert headers.exif_date_time_original(head[:-6]) is None  # the time cut short


# --- end marker, signature, hex prefix ------------------------------------------------------------


def test_has_jpeg_end():
    data = encode(image(100, 100), ".jpg", [cv2.IMWRITE_JPEG_QUALITY, 95])
    assert data.endswith(b"\xff\xd9") and len(data) > 4096
    assert headers.has_jpeg_end(data)
    assert headers.has_jpeg_end(data + bytes(500))  # camera padding after the marker
    assert headers.has_jpeg_end(data + bytes(1022))  # the marker's two bytes in the last 1 KiB
    assert not headers.has_jpeg_end(data + bytes(1023))
    assert not headers.has_jpeg_end(data[:-2])  # the end cut off
    assert not headers.has_jpeg_end(data[:-1])
    assert not headers.has_jpeg_end(data[: len(data) // 2])
    assert headers.has_jpeg_end(bytearray(data))
    assert headers.has_jpeg_end(b"\xff\xd8\xff\xd9")
    assert not headers.has_jpeg_end(b"\xff\xd9\x00")  # the first two bytes are never looked at
    assert not headers.has_jpeg_end(b"")


def test_is_jpeg():
    assert headers.is_jpeg(encode(image(8, 8), ".jpg"))
    assert not headers.is_jpeg(encode(image(8, 8), ".png"))
    assert not headers.is_jpeg(b"\xff\xd8")
    assert not headers.is_jpeg(b"\xff\xd8\x00\xe0")
    assert not headers.is_jpeg(b"")


def test_hex_prefix():
    assert headers.hex_prefix(b"not an image") == "6e 6f 74 20"
    assert headers.hex_prefix(b"\x00\xff\x0a") == "00 ff 0a"
    assert headers.hex_prefix(bytearray(b"\x89PNG\r\n")) == "89 50 4e 47"
    assert headers.hex_prefix(b"") == ""


# --- the module itself --------------------------------------------------------------------------


def test_module_imports_the_standard_library_only():
    tree = ast.parse(MODULE.read_text())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0
            names.add((node.module or "").split(".")[0])
    assert names <= set(sys.stdlib_module_names) | {"__future__"}, names
    assert ast.get_docstring(tree)


def test_header_is_a_frozen_value():
    header = ImageHeader("png", 3, 2, False)
    assert header == ImageHeader("png", 3, 2, False) and hash(header) == hash(
        ImageHeader("png", 3, 2, False)
    )
    with pytest.raises(AttributeError):
        header.width = 4
