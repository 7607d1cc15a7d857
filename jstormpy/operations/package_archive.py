"""Checks a code package's zip before anything is unpacked (docs/security.md).

A package comes from whoever may call ``Upgrade``; unpacking it must not write outside
its directory or fill the disk. Refused, with an error naming the entry:

* absolute paths, drive letters, backslashes and ``..`` components (path traversal);
* symbolic links (a link then a file through it escapes the directory);
* more than :data:`MAX_ENTRIES` entries, an entry or a total larger than
  :data:`MAX_ENTRY_BYTES` / :data:`MAX_TOTAL_BYTES` once unpacked, and entries compressed
  more than :data:`MAX_RATIO` times (zip bombs).

Sizes are the ones the archive declares; :func:`extract_package` never writes more than
that for an entry (``zipfile`` stops at the declared size and checks the CRC).
"""

from __future__ import annotations

import contextlib
import io
import shutil
import stat
import struct
import zipfile
import zlib
from collections.abc import Iterator
from pathlib import Path, PurePosixPath

from jstormpy.api.errors import UnsafePackageError

MAX_ENTRIES = 10_000
MAX_ENTRY_BYTES = 64 << 20
MAX_TOTAL_BYTES = 256 << 20
#: Uncompressed / compressed size above which an entry (of more than 1 MiB) is a bomb.
MAX_RATIO = 100
_RATIO_FLOOR = 1 << 20


#: What ``zipfile`` raises on a damaged or hostile archive (found by fuzzing, see
#: tests/fuzz): all become an UnsafePackageError naming the package.
ZIP_ERRORS = (zipfile.BadZipFile, zipfile.LargeZipFile, zlib.error, ValueError, EOFError,
              NotImplementedError, OSError, struct.error, KeyError, RuntimeError,
              UnicodeDecodeError, OverflowError)
_METHODS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


@contextlib.contextmanager
def open_package_zip(data: bytes, where: str) -> Iterator[zipfile.ZipFile]:
    """``zipfile.ZipFile`` over ``data``; a damaged archive (anywhere inside the block)
    raises UnsafePackageError instead of whatever ``zipfile``/``zlib`` raised."""
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            yield zf
    except UnsafePackageError:
        raise
    except ZIP_ERRORS as exc:
        raise UnsafePackageError(f"code package {where!r} is not a valid zip file: "
                                 f"{type(exc).__name__}: {exc}") from None


def check_package_archive(zf: zipfile.ZipFile, where: str) -> list[zipfile.ZipInfo]:
    """The archive's entries if every one is safe to unpack; UnsafePackageError naming the
    first that is not."""
    infos = zf.infolist()
    if len(infos) > MAX_ENTRIES:
        raise UnsafePackageError(f"code package {where!r} has {len(infos)} entries "
                                 f"(at most {MAX_ENTRIES})")
    total = 0
    for info in infos:
        name = info.filename
        parts = PurePosixPath(name).parts
        if (name.startswith(("/", "\\")) or "\\" in name or "\x00" in name
                or (len(name) > 1 and name[1] == ":") or ".." in parts):
            raise UnsafePackageError(f"code package {where!r}: entry {name!r} points outside "
                                     "the package (absolute path or '..')")
        if info.compress_type not in _METHODS or info.flag_bits & 0x1:
            raise UnsafePackageError(f"code package {where!r}: entry {name!r} is encrypted or "
                                     "uses a compression other than stored/deflated")
        mode = info.external_attr >> 16
        if stat.S_ISLNK(mode):
            raise UnsafePackageError(f"code package {where!r}: entry {name!r} is a symbolic "
                                     "link (links are not allowed)")
        if info.file_size > MAX_ENTRY_BYTES:
            raise UnsafePackageError(f"code package {where!r}: entry {name!r} unpacks to "
                                     f"{info.file_size} bytes (at most {MAX_ENTRY_BYTES})")
        if info.file_size > _RATIO_FLOOR and \
                info.file_size > MAX_RATIO * max(info.compress_size, 1):
            raise UnsafePackageError(
                f"code package {where!r}: entry {name!r} is compressed "
                f"{info.file_size // max(info.compress_size, 1)}x (at most {MAX_RATIO}x): "
                "a zip bomb?")
        total += info.file_size
        if total > MAX_TOTAL_BYTES:
            raise UnsafePackageError(f"code package {where!r} unpacks to more than "
                                     f"{MAX_TOTAL_BYTES} bytes (at entry {name!r})")
    return infos


def extract_package(zf: zipfile.ZipFile, root: Path, where: str) -> None:
    """Unpack a checked archive into ``root`` (regular files and directories only)."""
    base = root.resolve()
    for info in check_package_archive(zf, where):
        target = (base / info.filename).resolve()
        if target != base and base not in target.parents:
            raise UnsafePackageError(f"code package {where!r}: entry {info.filename!r} "
                                     "points outside the package")
        if info.is_dir():
            target.mkdir(parents=True, exist_ok=True)
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        with zf.open(info) as src, open(target, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
