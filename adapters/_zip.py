"""ZIP members compressed with zstd (method 93), which the standard library's ``zipfile`` cannot read
before Python 3.14 and which inspect_ai writes by default since 0.3.206.

A member is read from its local header with the raw bytes decompressed by ``zstandard`` and checked
against the CRC the archive records, so a damaged member is an error rather than silently wrong text.
Every other method is left to ``zipfile``.
"""

from __future__ import annotations

import struct
import zipfile
import zlib

import zstandard

ZSTD = 93
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")
_LOCAL_SIGNATURE = b"PK\x03\x04"


class MemberError(Exception):
    """A member that cannot be read; the message says what is wrong with it."""


def read_member(archive: zipfile.ZipFile, data: bytes, name: str) -> bytes:
    """The uncompressed bytes of one member of ``archive`` (whose whole content is ``data``)."""
    info = archive.getinfo(name)
    if info.compress_type != ZSTD:
        return archive.read(name)
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
        content = zstandard.ZstdDecompressor().decompressobj().decompress(raw)
    except zstandard.ZstdError as exc:
        raise MemberError(f"its zstd data is damaged ({exc})") from None
    if len(content) != info.file_size or zlib.crc32(content) != info.CRC:
        raise MemberError("its content does not match the size and checksum the archive records")
    return content
