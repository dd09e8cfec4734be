"""Files in UTF-16 or UTF-32 with a byte-order mark (Windows editors save them): decoded
for the rewriters and encoded back byte for byte in the same encoding, BOM first."""

from __future__ import annotations

import io
import tokenize
from dataclasses import dataclass

# UTF-32-LE's BOM starts with UTF-16-LE's: the longer ones are tried first.
_BOMS = (
    (b"\xff\xfe\x00\x00", "utf-32-le"),
    (b"\x00\x00\xfe\xff", "utf-32-be"),
    (b"\xff\xfe", "utf-16-le"),
    (b"\xfe\xff", "utf-16-be"),
)


@dataclass(frozen=True)
class Wide:
    """A UTF-16/32 file's BOM and the codec of the bytes after it."""

    bom: bytes
    codec: str  # "utf-16-le", "utf-32-be", ...

    @property
    def name(self) -> str:
        """The codec that decodes the whole file, BOM included ("utf-16"; for diffs)."""
        return self.codec[:-3]

    def decode(self, data: bytes) -> str:
        """Raises UnicodeDecodeError for bytes invalid in the codec."""
        return data[len(self.bom) :].decode(self.codec)

    def encode(self, text: str) -> bytes:
        return self.bom + text.encode(self.codec)


def wide_encoding(data: bytes) -> Wide | None:
    """The UTF-16/32 encoding `data` declares with its BOM, or None."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            return Wide(bom, codec)
    return None


def as_utf8(data: bytes) -> bytes:
    """`data` as UTF-8 for byte searches (a UTF-16 file spells no ASCII name), unchanged
    unless it has a UTF-16/32 BOM."""
    wide = wide_encoding(data)
    if wide is None:
        return data
    return data[len(wide.bom) :].decode(wide.codec, errors="replace").encode("utf-8")


def decode_python(data: bytes) -> tuple[str, str]:
    """(encoding, text) of Python source bytes per PEP 263 and the BOM.

    Raises:
        SyntaxError: a malformed or unknown coding cookie.
        UnicodeDecodeError: bytes invalid in the declared encoding.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    return encoding, data.decode(encoding)


def as_text(data: bytes, encoding: str) -> str | None:
    """`data` decoded as `encoding` (or the wide encoding its BOM says); None for bytes that do
    not decode or hold a NUL (binary)."""
    wide = wide_encoding(data)
    try:
        text = wide.decode(data) if wide else data.decode(encoding)
    except (UnicodeDecodeError, LookupError):
        return None
    return None if "\x00" in text else text


def nul_position(text: str) -> tuple[int, int]:
    """(line, column), both 1-based, of the first NUL in `text`."""
    offset = text.index("\x00")
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def decode_reason(exc: BaseException) -> str:
    if isinstance(exc, UnicodeDecodeError):
        return f"invalid {exc.encoding} byte 0x{exc.object[exc.start]:02x} at offset {exc.start}"
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__
