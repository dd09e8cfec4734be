"""Files in UTF-16 or UTF-32 with a byte-order mark (Windows editors save them): decoded
for the rewriters and encoded back byte for byte in the same encoding, BOM first."""

from __future__ import annotations

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
