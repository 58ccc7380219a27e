"""ZIP members compressed with zstd (method 93), which the standard library's ``zipfile`` cannot read
before Python 3.14 and which inspect_ai writes by default since 0.3.206.

A member is read from its local header with the raw bytes decompressed by ``zstandard`` and checked
against the CRC the archive records, so a damaged member is an error rather than silently wrong text.
Every other method is left to ``zipfile``. Either way a member is decompressed in chunks and refused
once it passes ``limit`` bytes, whatever size the archive claims for it: a zip bomb costs at most that.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib

import zstandard

ZSTD = 93
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"
_CHUNK = 1 << 20


class MemberError(Exception):
    """A member that cannot be read; the message says what is wrong with it."""


class MemberTooLarge(MemberError):
    """A member that decompresses to more than the limit (``size``: what it claims, or the limit + 1)."""

    def __init__(self, size: int):
        super().__init__(f"it decompresses to {size} bytes or more")
        self.size = size


def read_member(archive: zipfile.ZipFile, data: bytes, name: str, limit: int) -> bytes:
    """The uncompressed bytes of one member of ``archive`` (whose whole content is ``data``), at most
    ``limit`` of them (else :class:`MemberTooLarge`)."""
    info = archive.getinfo(name)
    if info.file_size > limit:
        raise MemberTooLarge(info.file_size)
    if info.compress_type != ZSTD:
        with archive.open(name) as stream:
            return _bounded(stream, limit)
    start = info.header_offset
    header = data[start : start + _LOCAL_HEADER.size]
    if len(header) < _LOCAL_HEADER.size or header[:4] != _LOCAL_SIGNATURE:
        raise MemberError("its local header is missing: the archive is truncated or damaged")
    fields = _LOCAL_HEADER.unpack(header)
    name_length, extra_length = fields[-2], fields[-1]
    begin = start + _LOCAL_HEADER.size + name_length + extra_length
    raw = data[begin : begin + info.compress_size]
    if len(raw) < info.compress_size:
        raise MemberError("the archive ends inside it: the file is truncated")
    try:
        with zstandard.ZstdDecompressor().stream_reader(io.BytesIO(raw)) as stream:
            content = _bounded(stream, limit)
    except zstandard.ZstdError as exc:
        raise MemberError(f"its zstd data is damaged ({exc})") from None
    if len(content) != info.file_size or zlib.crc32(content) != info.CRC:
        raise MemberError("its content does not match the size and checksum the archive records")
    return content


def _bounded(stream: io.RawIOBase | io.BufferedIOBase, limit: int) -> bytes:
    """Everything ``stream`` gives, read in chunks, or :class:`MemberTooLarge` once past ``limit``."""
    chunks, total = [], 0
    while chunk := stream.read(min(_CHUNK, limit + 1 - total)):
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise MemberTooLarge(total)
    return b"".join(chunks)
