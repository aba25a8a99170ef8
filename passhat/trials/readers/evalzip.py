"""Inspect's `.eval` log container: a zip whose members are JSON, most of them zstd-compressed.

inspect-ai (0.3.x) writes `header.json` (the eval spec, status and results, once the run
ends), `_journal/start.json` (the spec, written first), one `samples/<id>_epoch_<n>.json`
per sample x epoch, and summaries. It compresses members with zstd (zip method 93), which
Python's `zipfile` cannot decompress, so this module reads the directory with `zipfile`
and decompresses each member itself with `zstandard` (what inspect-ai uses too); members
stored or deflated go through `zipfile`. One member is decoded at a time: a log of many
samples is read in the memory of its largest sample. No inspect-ai import.
"""

from __future__ import annotations

import json
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from passhat.api.errors import InputError

__all__ = ["EvalZip"]

_ZSTD = 93
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, then name and extra lengths at 26
_LOCAL_SIGNATURE = b"PK\x03\x04"
CUT_SHORT = "cut short"


class EvalZip:
    """An open `.eval` file; InputError (naming the file) for anything that is not a sound zip."""

    def __init__(self, path: Path, *, name: str) -> None:
        self.name = name
        try:
            self._file: IO[bytes] = path.open("rb")
        except OSError as err:
            raise InputError(f"cannot read: {err.strerror}", path=name) from None
        try:
            self._zip = zipfile.ZipFile(self._file)
        except (zipfile.BadZipFile, OSError, ValueError):
            self._file.seek(0)
            start = self._file.read(4)
            self._file.close()
            if start == _LOCAL_SIGNATURE:
                raise InputError(
                    f"{CUT_SHORT}: an Inspect .eval log (a zip) without the directory that "
                    "ends a complete one (was it copied or written while Inspect still ran?)",
                    path=name,
                ) from None
            raise InputError("not an Inspect .eval log: not a zip file", path=name) from None
        self._size = path.stat().st_size

    def __enter__(self) -> EvalZip:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        """Close the file."""
        self._zip.close()
        self._file.close()

    def names(self) -> list[str]:
        """Member names in file order (a name written twice appears twice)."""
        return [info.filename for info in self._zip.infolist()]

    def members(self, prefix: str) -> Iterator[tuple[str, Any]]:
        """(name, decoded JSON) of each member under `prefix`, in file order, one at a time."""
        for info in self._zip.infolist():
            if info.filename.startswith(prefix) and not info.is_dir():
                yield info.filename, self._decode(info)

    def read(self, member: str) -> Any | None:
        """The decoded JSON of the last member of that name, None when there is none."""
        infos = [info for info in self._zip.infolist() if info.filename == member]
        return self._decode(infos[-1]) if infos else None

    def _decode(self, info: zipfile.ZipInfo) -> Any:
        data = self._bytes(info)
        try:
            return json.loads(data)
        except (ValueError, RecursionError) as err:
            reason = err.msg if isinstance(err, json.JSONDecodeError) else type(err).__name__
            where = f"member {info.filename}"
            raise InputError(f"{where}: bad JSON: {reason}", path=self.name) from None

    def _bytes(self, info: zipfile.ZipInfo) -> bytes:
        where = f"member {info.filename}"
        if info.compress_type != _ZSTD:
            try:
                with self._zip.open(info) as member:
                    return member.read()
            except NotImplementedError:
                raise InputError(
                    f"{where}: zip compression method {info.compress_type} is not supported",
                    path=self.name,
                ) from None
            except (zipfile.BadZipFile, zlib.error, OSError, EOFError) as err:
                raise InputError(f"{where}: corrupt ({err})", path=self.name) from None
        self._file.seek(info.header_offset)
        header = self._file.read(_LOCAL_HEADER.size)
        if len(header) < _LOCAL_HEADER.size:
            raise InputError(f"{CUT_SHORT}: {where} is past the end", path=self.name)
        signature, name_length, extra_length = _LOCAL_HEADER.unpack(header)
        if signature != _LOCAL_SIGNATURE:
            raise InputError(f"{where}: corrupt (no local header)", path=self.name)
        start = info.header_offset + _LOCAL_HEADER.size + name_length + extra_length
        if start + info.compress_size > self._size:
            raise InputError(f"{CUT_SHORT}: {where} ends past the end", path=self.name)
        self._file.seek(start)
        compressed = self._file.read(info.compress_size)
        return _zstd(compressed, info, where=where, path=self.name)


def _zstd(compressed: bytes, info: zipfile.ZipInfo, *, where: str, path: str) -> bytes:
    import zstandard  # NB: lazily: only .eval logs need it

    try:
        data = zstandard.ZstdDecompressor().decompressobj().decompress(compressed)
    except zstandard.ZstdError as err:
        raise InputError(f"{where}: corrupt zstd data ({err})", path=path) from None
    if len(data) != info.file_size or zlib.crc32(data) != info.CRC:
        raise InputError(f"{where}: corrupt (size or CRC does not match)", path=path)
    return data
