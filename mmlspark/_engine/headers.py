"""Image headers and EXIF tags read without decoding: the Python twin of the JVM readers.

A port of ``ImageHeader.read`` (``scala/.../pixels/ImageHeader.scala``) and of
``Exif``, ``isJpeg``, ``hasJpegEnd`` and ``hexPrefix`` (``scala/.../pixels/ImageCodec.scala``),
so that the Python backend bounds memory, orients photos and words its errors exactly as the JVM
does: same byte offsets, same signed/unsigned readings, and a header cut short gives ``None`` (or
orientation 1) where the JVM catches an ``IndexOutOfBoundsException``. One difference: a TIFF
whose first IFD offset is over 2^31 - 1 gives None here, where the JVM's ``Math.toIntExact``
throws an ``ArithmeticException`` that ``ImageHeader.read`` does not catch.

Standard library only, and nothing from ``mmlspark``: part of the engine (``mmlspark._engine``),
which is shipped to Spark workers by value, and loadable from its file alone. Every function takes
``bytes`` (a ``bytearray``, as PySpark gives binary columns, works too).
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass

__all__ = [
    "ImageHeader",
    "exif_date_time_original",
    "exif_orientation",
    "has_jpeg_end",
    "hex_prefix",
    "is_jpeg",
    "read_header",
]

_INT_MAX = 0x7FFFFFFF

_LE16 = "<H"
_BE16 = ">H"
_LE32 = "<I"
_BE32 = ">I"
_LE16X2 = "<HH"
_BE16X2 = ">HH"
_BE32X2 = ">II"
_LE32S = "<i"

# Netpbm text: Scala's `linesIterator` ends lines at \r, \n or \r\n (2.12.x and 2.13 alike),
# `String.trim` drops chars <= ' ' at both ends, and Java's `\s` is [ \t\n\x0B\f\r] (not Python's
# wider str.split() / splitlines() set, which takes \x1c-\x1f and \x85 too).
_LINE_BREAK = re.compile(r"[\r\n]")
_JAVA_SPACE = re.compile(r"[ \t\n\x0b\f\r]+")
_JAVA_TRIM = "".join(map(chr, range(0x21)))


@dataclass(frozen=True)
class ImageHeader:
    """What an encoded image's header says, read before anything is decoded.

    ``format`` is ``jpeg``, ``png``, ``gif``, ``bmp``, ``webp``, ``tiff`` or ``pnm``; ``scalable``
    is whether the codec can decode at 1/2, 1/4 or 1/8 of the size without decoding at full size
    first (JPEG's DCT scaling).
    """

    format: str
    width: int
    height: int
    scalable: bool

    @property
    def pixels(self) -> int:
        """Width times height (a Scala ``Long``: never overflows)."""
        return self.width * self.height


def _clamp(v: int) -> int:
    return v if v < _INT_MAX else _INT_MAX


def read_header(data: bytes) -> ImageHeader | None:
    """The header of ``data``, or None for a format this reader does not know, for fewer than 8
    bytes (or None), and for a header cut short (OpenCV may still decode the first; the size is
    then checked after decoding; the last is left to the codec to explain)."""
    if not data or len(data) < 8:
        return None
    try:
        b0 = data[0]
        if b0 == 0xFF and data[1] == 0xD8:
            return _jpeg(data)
        if data.startswith(b"\x89PNG"):
            return _png(data)
        if data.startswith(b"GIF8"):
            width, height = struct.unpack_from(_LE16X2, data, 6)
            return ImageHeader("gif", width, height, False)
        if data.startswith(b"BM"):
            return _bmp(data) if len(data) >= 26 else None
        if data.startswith(b"RIFF") and data[8:12] == b"WEBP":
            return _webp(data)
        if data.startswith(b"II*\x00") or data.startswith(b"MM\x00*"):
            return _tiff(data)
        if b0 == 0x50 and 0x31 <= data[1] <= 0x37:  # "P1" to "P7"
            return _pnm(data)
        return None
    except (IndexError, struct.error):  # a header cut short: let the codec say why
        return None


def _jpeg(b: bytes) -> ImageHeader | None:
    """The frame size from the first start-of-frame marker (SOF0-SOF15 except DHT, JPG, DAC)."""
    n = len(b)
    pos = 2
    while pos + 4 <= n:
        if b[pos] != 0xFF:
            return None
        marker = b[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
        elif marker == 0xD8 or 0xD0 <= marker <= 0xD7:
            pos += 2
        elif marker == 0xDA or marker == 0xD9:  # scan before any frame header
            return None
        elif 0xC0 <= marker <= 0xCF and marker != 0xC4 and marker != 0xC8 and marker != 0xCC:
            # Progressive JPEGs are DCT-scaled by libjpeg too (SOF2 yes); lossless ones are not.
            scalable = marker != 0xC3 and marker != 0xC7 and marker != 0xCB and marker != 0xCF
            width = (b[pos + 7] << 8) | b[pos + 8]  # IndexError when cut short
            height = (b[pos + 5] << 8) | b[pos + 6]
            return ImageHeader("jpeg", width, height, scalable)
        else:
            pos += 2 + ((b[pos + 2] << 8) | b[pos + 3])
    return None


def _png(b: bytes) -> ImageHeader | None:
    if len(b) >= 24 and b[12:16] == b"IHDR":
        width, height = struct.unpack_from(_BE32X2, b, 16)
        return ImageHeader("png", _clamp(width), _clamp(height), False)
    return None


def _bmp(b: bytes) -> ImageHeader:
    if struct.unpack_from(_LE32, b, 14)[0] == 12:  # BITMAPCOREHEADER: unsigned 16-bit sizes
        width, height = struct.unpack_from(_LE16X2, b, 18)
        return ImageHeader("bmp", width, height, False)
    # Signed 32-bit sizes (Scala's `le32(...).toInt`); height is negative for top-down bitmaps.
    width = abs(struct.unpack_from(_LE32S, b, 18)[0])
    height = abs(struct.unpack_from(_LE32S, b, 22)[0])
    return ImageHeader("bmp", _clamp(width), _clamp(height), False)


def _webp(b: bytes) -> ImageHeader | None:
    n = len(b)
    if n < 16:  # the JVM's `new String(b, 12, 4)` throws: cut short
        return None
    chunk = b[12:16]
    if chunk == b"VP8 " and n >= 30:
        width, height = struct.unpack_from(_LE16X2, b, 26)
        return ImageHeader("webp", width & 0x3FFF, height & 0x3FFF, False)
    if chunk == b"VP8L" and n >= 25:
        bits = struct.unpack_from(_LE32, b, 21)[0]
        return ImageHeader("webp", (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1, False)
    if chunk == b"VP8X" and n >= 30:
        width = int.from_bytes(b[24:27], "little") + 1
        height = int.from_bytes(b[27:30], "little") + 1
        return ImageHeader("webp", width, height, False)
    return None


def _tiff(b: bytes) -> ImageHeader | None:
    """Width and height (tags 256, 257) of the first image file directory."""
    little = b[0] == 0x49  # "I"
    u16, u32, tag_type = (_LE16, _LE32, _LE16X2) if little else (_BE16, _BE32, _BE16X2)
    ifd = struct.unpack_from(u32, b, 4)[0]
    if ifd > _INT_MAX:
        # The JVM's Math.toIntExact throws ArithmeticException here, which ImageHeader.read does
        # not catch; an offset past any array the JVM can hold reads here as a header cut short.
        return None
    entries = struct.unpack_from(u16, b, ifd)[0]
    width: int | None = None
    height: int | None = None
    # Every entry is read (Scala builds a Map of all of them: a bad one fails the whole header),
    # and a repeated tag keeps its last value.
    for at in range(ifd + 2, ifd + 2 + entries * 12, 12):
        tag, kind = struct.unpack_from(tag_type, b, at)
        value = struct.unpack_from(u16 if kind == 3 else u32, b, at + 8)[0]
        if tag == 256:
            width = value
        elif tag == 257:
            height = value
    if width is None or height is None:
        return None
    return ImageHeader("tiff", _clamp(width), _clamp(height), False)


def _pnm(b: bytes) -> ImageHeader | None:
    """Netpbm: "P6 <width> <height> ..." in ASCII, with # comments."""
    text = b[2 : 2 + min(len(b) - 2, 1024)].decode("latin-1")
    numbers: list[str] = []
    for line in _LINE_BREAK.split(text):
        for token in _JAVA_SPACE.split(line.split("#", 1)[0].strip(_JAVA_TRIM)):
            if token:
                numbers.append(token)
                if len(numbers) == 2:
                    break
        if len(numbers) == 2:
            break
    if len(numbers) != 2:
        return None
    w, h = numbers
    # Java's Char.isDigit over ISO-8859-1 is ASCII 0-9 only (str.isdigit also takes "²", "³").
    if w.isascii() and w.isdigit() and h.isascii() and h.isdigit() and len(w) < 10 and len(h) < 10:
        return ImageHeader("pnm", int(w), int(h), False)
    return None


def is_jpeg(data: bytes) -> bool:
    """Whether ``data`` starts like a JPEG (FF D8 FF)."""
    return data.startswith(b"\xff\xd8\xff")


def has_jpeg_end(data: bytes) -> bool:
    """Whether an end-of-image marker (FF D9) stands in the last 1 KiB (cameras may pad after
    it); never looks at the first two bytes."""
    return data.find(b"\xff\xd9", max(2, len(data) - 1024)) != -1


def jpeg_data_shortfall(data: bytes) -> tuple[int, int, int] | None:
    """For a Huffman-coded DCT JPEG (SOF0-SOF2), ``(have, need, blocks)`` when its entropy-coded
    data is shorter than the frame it declares can be: every 8x8 block takes at least one bit
    (a Huffman code is at least one bit long), so ``need`` is ``blocks / 8`` bytes, and ``have``
    is what lies between the first scan's header and the end-of-image marker. None when the data
    can be that long, or the file is not such a JPEG. libjpeg decodes such a file as gray
    without an error; this is how it is told apart (the JVM's ``ImageHeader.jpegDataShortfall``).
    """
    n, pos = len(data), 2
    blocks = -1
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            return None
        marker = data[pos + 1]
        if marker == 0xFF:
            pos += 1
            continue
        if marker == 0xD8 or 0xD0 <= marker <= 0xD7:
            pos += 2
            continue
        if marker == 0xD9:
            return None
        length = (data[pos + 2] << 8) | data[pos + 3]
        if 0xC0 <= marker <= 0xC2:
            if pos + 10 > n:
                return None
            height = (data[pos + 5] << 8) | data[pos + 6]
            width = (data[pos + 7] << 8) | data[pos + 8]
            count = data[pos + 9]
            if pos + 10 + 3 * count > n or count == 0:
                return None
            factors = [data[pos + 11 + 3 * i] for i in range(count)]
            h = [f >> 4 for f in factors]
            v = [f & 15 for f in factors]
            if min(h) == 0 or min(v) == 0:
                return None
            mcus = -(-width // (8 * max(h))) * -(-height // (8 * max(v)))
            blocks = mcus * sum(a * b for a, b in zip(h, v, strict=True))
        elif 0xC3 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            return None  # lossless or arithmetic-coded: a block may take less than a bit
        elif marker == 0xDA:
            if blocks < 0:
                return None
            start = pos + 2 + length
            end = data.rfind(b"\xff\xd9", max(start, n - 1024))
            have = (end if end != -1 else n) - start
            need = -(-blocks // 8)
            return (have, need, blocks) if have < need else None
        pos += 2 + length
    return None


def hex_prefix(data: bytes) -> str:
    """The first (up to) 4 bytes in lower-case hex, space-separated: ``"6e 6f 74 20"``."""
    return bytes(data[:4]).hex(" ")


def _s32(v: int) -> int:
    """Scala's ``Long.toInt`` of an unsigned 32-bit value: the signed reinterpretation."""
    return v - 0x100000000 if v > _INT_MAX else v


class _Tiff:
    """The TIFF structure inside a JPEG's EXIF block; reads raise IndexError out of bounds
    (negative offsets included, as on the JVM)."""

    __slots__ = ("_b", "_n", "_u16", "_u32", "tiff")

    def __init__(self, b: bytes, tiff: int) -> None:
        self._b = b
        self._n = len(b)
        self.tiff = tiff
        little = b[tiff] == 0x49  # "I"; anything else reads as big-endian
        self._u16 = _LE16 if little else _BE16
        self._u32 = _LE32 if little else _BE32

    def u16(self, i: int) -> int:
        if i < 0 or i + 2 > self._n:
            raise IndexError(i)
        value: int = struct.unpack_from(self._u16, self._b, i)[0]
        return value

    def u32(self, i: int) -> int:
        if i < 0 or i + 4 > self._n:
            raise IndexError(i)
        value: int = struct.unpack_from(self._u32, self._b, i)[0]
        return value

    def ifd0(self) -> int:
        return self.tiff + _s32(self.u32(self.tiff + 4))

    def entry(self, ifd: int, tag: int) -> int | None:
        """The offset of the first entry of ``tag`` in the IFD at ``ifd`` (entries after it are
        not read)."""
        for at in range(ifd + 2, ifd + 2 + self.u16(ifd) * 12, 12):
            if self.u16(at) == tag:
                return at
        return None


def _exif_tiff(b: bytes) -> _Tiff | None:
    """The TIFF block of the first APP1 "Exif" segment before the first scan."""
    n = len(b)
    pos = 2
    while pos + 4 <= n and b[pos] == 0xFF:
        marker = b[pos + 1]
        length = (b[pos + 2] << 8) | b[pos + 3]
        if marker == 0xDA or marker == 0xD9:  # start of scan: no EXIF before it
            return None
        if marker == 0xE1 and length >= 8:
            if pos + 8 > n:  # the JVM's `new String(b, pos + 4, 4)` throws
                raise IndexError(pos + 8)
            if b[pos + 4 : pos + 8] == b"Exif":
                return _Tiff(b, pos + 10)
        pos += 2 + length
    return None


def exif_orientation(data: bytes) -> int:
    """The EXIF orientation (tag 0x0112 of IFD0, 1-8) of a JPEG, or 1 when it has none that can
    be read or its value is outside 1-8."""
    try:
        t = _exif_tiff(data)
        if t is None:
            return 1
        at = t.entry(t.ifd0(), 0x0112)
        if at is None:
            return 1
        orientation = t.u16(at + 8)
        return orientation if 1 <= orientation <= 8 else 1
    except IndexError:
        return 1


def exif_seconds(head: bytes) -> float | None:
    """DateTimeOriginal of a JPEG head as seconds, the camera's local time read as if UTC (only
    differences between photos matter), or None without a valid one (the JVM's
    ``TakenTimes.seconds``)."""
    import datetime

    if not is_jpeg(head):
        return None
    text = exif_date_time_original(head)
    if text is None:
        return None
    try:
        taken = datetime.datetime.strptime(text, "%Y:%m:%d %H:%M:%S")
    except ValueError:
        return None
    return taken.replace(tzinfo=datetime.timezone.utc).timestamp()


def exif_date_time_original(data: bytes) -> str | None:
    """DateTimeOriginal (tag 0x9003 in the EXIF sub-IFD) as the camera wrote it, the 19 chars
    "yyyy:MM:dd HH:mm:ss" in the camera's local time, or None when the JPEG (or the head of it
    given) has none that can be read."""
    try:
        t = _exif_tiff(data)
        if t is None:
            return None
        pointer = t.entry(t.ifd0(), 0x8769)
        if pointer is None:
            return None
        entry = t.entry(t.tiff + _s32(t.u32(pointer + 8)), 0x9003)
        if entry is None:
            return None
        count = _s32(t.u32(entry + 4))
        if t.u16(entry + 2) != 2 or count < 19 or count > 64:  # ASCII, 19 chars and a NUL
            return None
        at = t.tiff + _s32(t.u32(entry + 8))
        if at < 0 or at + 19 > len(data):
            return None
        return bytes(data[at : at + 19]).decode("latin-1")
    except IndexError:
        return None
