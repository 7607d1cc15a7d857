"""The WebHDFS protocol of :mod:`jstormpy.testing.servers.webhdfs`: the request handler (NameNode
and DataNode operations) over a local directory (:class:`Namespace`), with Hadoop's
error mapping. The server, its fault injection and the CLI are in ``webhdfs``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shutil
import stat
import struct
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, quote, unquote, urlencode, urlsplit

if TYPE_CHECKING:
    from jstormpy.testing.servers.webhdfs import HttpServer

log = logging.getLogger("jstormpy.testing.servers.webhdfs")

PREFIX = "/webhdfs/v1"
BLOCK_SIZE = 128 * 1024 * 1024
BYTES_PER_CRC = 512
_GET_OPS = {"OPEN", "GETFILESTATUS", "LISTSTATUS", "GETCONTENTSUMMARY", "GETFILECHECKSUM",
            "GETHOMEDIRECTORY", "GETFILEBLOCKLOCATIONS", "GETACLSTATUS", "GETTRASHROOT",
            "GETSERVERDEFAULTS"}
_PUT_OPS = {"CREATE", "MKDIRS", "RENAME", "SETREPLICATION", "SETPERMISSION", "SETOWNER",
            "SETTIMES"}
_POST_OPS = {"APPEND"}
_DELETE_OPS = {"DELETE"}
_OP_CLASS = {"GET": ("GetOpParam", _GET_OPS), "PUT": ("PutOpParam", _PUT_OPS),
             "POST": ("PostOpParam", _POST_OPS), "DELETE": ("DeleteOpParam", _DELETE_OPS)}

_EXC = {
    "FileNotFoundException": ("java.io.FileNotFoundException", 404),
    "FileAlreadyExistsException": ("org.apache.hadoop.fs.FileAlreadyExistsException", 403),
    "ParentNotDirectoryException": ("org.apache.hadoop.fs.ParentNotDirectoryException", 403),
    "PathIsNotEmptyDirectoryException":
        ("org.apache.hadoop.fs.PathIsNotEmptyDirectoryException", 403),
    "IOException": ("java.io.IOException", 403),
    "IllegalArgumentException": ("java.lang.IllegalArgumentException", 400),
    "UnsupportedOperationException": ("java.lang.UnsupportedOperationException", 400),
}


class RemoteError(Exception):
    """A Hadoop exception to send back as a RemoteException JSON document."""

    def __init__(self, exception: str, message: str) -> None:
        super().__init__(message)
        self.exception = exception
        self.message = message

    @property
    def status(self) -> int:
        """The HTTP status Hadoop's ExceptionHandler uses for this exception."""
        return _EXC[self.exception][1]

    def body(self) -> dict[str, Any]:
        """The JSON error document."""
        return {"RemoteException": {"exception": self.exception,
                                    "javaClassName": _EXC[self.exception][0],
                                    "message": self.message}}


def _bool(value: str | None, default: bool) -> bool:
    if value is None or value == "":
        return default
    return value.lower() == "true"


class Namespace:
    """The file system: HDFS paths mapped onto a local directory."""

    def __init__(self, root: Path, owner: str) -> None:
        self.root = root
        self.owner = owner
        self.lock = threading.RLock()

    def local(self, hdfs_path: str) -> Path:
        parts = [p for p in hdfs_path.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise RemoteError("IllegalArgumentException", f"Invalid path name {hdfs_path}")
        return self.root.joinpath(*parts)

    def status(self, hdfs_path: str, local: Path, suffix: str) -> dict[str, Any]:
        try:
            st = local.stat()
        except FileNotFoundError:
            raise RemoteError("FileNotFoundException",
                              f"File does not exist: {hdfs_path}") from None
        is_dir = stat.S_ISDIR(st.st_mode)
        out: dict[str, Any] = {
            "accessTime": 0 if is_dir else int(st.st_atime * 1000),
            "blockSize": 0 if is_dir else BLOCK_SIZE,
            "childrenNum": len(os.listdir(local)) if is_dir else 0,
            "fileId": st.st_ino,
            "group": "supergroup",
            "length": 0 if is_dir else st.st_size,
            "modificationTime": int(st.st_mtime * 1000),
            "owner": self.owner,
            "pathSuffix": suffix,
            "permission": format(st.st_mode & 0o777, "o"),
            "replication": 0 if is_dir else 1,
            "storagePolicy": 0,
            "type": "DIRECTORY" if is_dir else "FILE",
        }
        return out

    def ensure_parent_dirs(self, hdfs_path: str, local: Path) -> None:
        parent = local.parent
        probe = parent
        while probe != self.root and not probe.exists():
            probe = probe.parent
        if probe.exists() and not probe.is_dir():
            raise RemoteError("ParentNotDirectoryException",
                              f"Parent path is not a directory: {hdfs_path}")
        try:
            parent.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise RemoteError("ParentNotDirectoryException",
                              f"Parent path is not a directory: {hdfs_path}") from None


class RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True  # no 40 ms Nagle/delayed-ACK stalls on keep-alive
    server: HttpServer

    # -- plumbing ---------------------------------------------------------------------
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib name
        log.debug("webhdfs %s: " + format, self.address_string(), *args)

    def _send(self, code: int, body: bytes = b"", ctype: str = "application/json",
              headers: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        if self.close_connection:  # say so: a client must not reuse it for its next request
            self.send_header("Connection", "close")
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _json(self, obj: Any, code: int = 200) -> None:
        self._send(code, json.dumps(obj).encode())

    def _body_chunks(self) -> Iterator[bytes]:
        """The request body, de-chunked (Transfer-Encoding: chunked) if needed."""
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            while True:
                line = self.rfile.readline(65537)
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                        pass
                    return
                left = size
                while left:
                    piece = self.rfile.read(min(left, 1 << 20))
                    if not piece:
                        raise ConnectionError("client closed mid-chunk")
                    left -= len(piece)
                    yield piece
                self.rfile.readline(3)
        else:
            left = int(self.headers.get("Content-Length") or 0)
            while left:
                piece = self.rfile.read(min(left, 1 << 20))
                if not piece:
                    raise ConnectionError("client closed mid-body")
                left -= len(piece)
                yield piece

    def _drain(self) -> None:
        for _ in self._body_chunks():
            pass

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_PUT(self) -> None:
        self._dispatch("PUT")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def do_DELETE(self) -> None:
        self._dispatch("DELETE")

    def _dispatch(self, method: str) -> None:
        if self.server.take_fault():
            self._drain()
            err = RemoteError("IOException", "injected fault (WebHdfsServer.fail_next)")
            self._json(err.body(), 503)
            return
        url = urlsplit(self.path)
        params = {k.lower(): v for k, v in parse_qsl(url.query, keep_blank_values=True)}
        params["op"] = params.get("op", "").upper()
        try:
            if not url.path.startswith(PREFIX):
                self._drain()
                self._send(404, b"not a WebHDFS URL", "text/plain")
                return
            hdfs_path = unquote(url.path[len(PREFIX):]) or "/"
            op = params["op"]
            cls, ops = _OP_CLASS[method]
            if op not in ops:
                self._drain()
                raise RemoteError(
                    "IllegalArgumentException",
                    f'Invalid value for webhdfs parameter "op": No enum constant '
                    f"org.apache.hadoop.hdfs.web.resources.{cls}.Op.{op}")
            handler = getattr(self, f"op_{op.lower()}")
            if op not in ("CREATE", "APPEND"):
                self._drain()
            handler(hdfs_path, params)
        except RemoteError as err:
            if params["op"] in ("CREATE", "APPEND"):
                self.close_connection = True  # the body may not have been consumed
            self._json(err.body(), err.status)
        except (ConnectionError, BrokenPipeError):
            self.close_connection = True
        except Exception as exc:  # pragma: no cover - server bug surfaces to client
            log.exception("webhdfs: %s %s failed", method, self.path)
            bug = RemoteError("IOException", f"{type(exc).__name__}: {exc}")
            self._json(bug.body(), 500)

    @property
    def ns(self) -> Namespace:
        return self.server.namespace

    def _redirect(self, hdfs_path: str, params: dict[str, str]) -> None:
        host = self.headers.get("Host") or f"127.0.0.1:{self.server.port}"
        query = {k: v for k, v in params.items() if k != "noredirect"}
        query["datanode"] = "true"
        query["namenoderpcaddress"] = host
        location = f"http://{host}{PREFIX}{quote(hdfs_path)}?{urlencode(query)}"
        if _bool(params.get("noredirect"), False):
            self._json({"Location": location})
        else:
            self._send(307, b"", "application/octet-stream", {"Location": location})

    # -- reads ------------------------------------------------------------------------
    def op_open(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        if not local.exists():
            raise RemoteError("FileNotFoundException", f"File does not exist: {hdfs_path}")
        if local.is_dir():
            raise RemoteError("FileNotFoundException", f"Path is not a file: {hdfs_path}")
        if not _bool(params.get("datanode"), False):
            self._redirect(hdfs_path, params)
            return
        # open before answering: a file deleted between the checks above and here is a
        # FileNotFoundException (404) like on a NameNode, never a 200 with missing bytes;
        # once open, the descriptor keeps serving it even if it is deleted meanwhile
        try:
            fh = local.open("rb")
        except (FileNotFoundError, IsADirectoryError):
            raise RemoteError("FileNotFoundException",
                              f"File does not exist: {hdfs_path}") from None
        with fh:
            offset = int(params.get("offset") or 0)
            size = os.fstat(fh.fileno()).st_size
            if offset < 0 or offset > size:
                raise RemoteError("IOException", f"Offset={offset} out of the range "
                                                 f"[0, {size}]; OPEN, path={hdfs_path}")
            length = params.get("length")
            count = size - offset if not length else min(int(length), size - offset)
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(count))
            self.end_headers()
            fh.seek(offset)
            left = count
            while left:
                piece = fh.read(min(left, 1 << 20))
                if not piece:
                    break
                self.wfile.write(piece)
                left -= len(piece)

    def op_getfilestatus(self, hdfs_path: str, params: dict[str, str]) -> None:
        self._json({"FileStatus": self.ns.status(hdfs_path, self.ns.local(hdfs_path), "")})

    def op_liststatus(self, hdfs_path: str, params: dict[str, str]) -> None:
        if self.server.take_listing_fault(hdfs_path):
            raise RemoteError("FileNotFoundException", f"File {hdfs_path} does not exist. "
                              "(injected: WebHdfsServer.fail_listings)")
        local = self.ns.local(hdfs_path)
        with self.ns.lock:
            if local.is_dir():
                entries = []
                for name in sorted(os.listdir(local)):
                    try:
                        entries.append(self.ns.status(f"{hdfs_path}/{name}", local / name, name))
                    except RemoteError:
                        continue  # deleted meanwhile
            else:
                entries = [self.ns.status(hdfs_path, local, "")]
        self._json({"FileStatuses": {"FileStatus": entries}})

    def op_getcontentsummary(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        if not local.exists():
            raise RemoteError("FileNotFoundException", f"File does not exist: {hdfs_path}")
        dirs = files = length = 0
        if local.is_dir():
            for _dirpath, dirnames, filenames in os.walk(local):
                dirs += 1
                for name in filenames:
                    files += 1
                    length += (Path(_dirpath) / name).stat().st_size
                del dirnames  # walked by os.walk
        else:
            files, length = 1, local.stat().st_size
        self._json({"ContentSummary": {
            "directoryCount": dirs, "fileCount": files, "length": length, "quota": -1,
            "spaceConsumed": length, "spaceQuota": -1, "typeQuota": {}}})

    def op_getfilechecksum(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        if not local.is_file():
            raise RemoteError("FileNotFoundException", f"File does not exist: {hdfs_path}")
        # MD5-of-MD5-of-CRC32 as HDFS computes it (gzip CRC32 instead of CRC32C).
        block_md5s = []
        nblocks = 0
        with local.open("rb") as fh:
            while True:
                block = fh.read(BLOCK_SIZE)
                if not block and nblocks:
                    break
                crcs = b"".join(struct.pack(">I", zlib.crc32(block[i:i + BYTES_PER_CRC]))
                                for i in range(0, len(block), BYTES_PER_CRC))
                block_md5s.append(hashlib.md5(crcs).digest())  # noqa: S324 - HDFS's algorithm
                nblocks += 1
                if len(block) < BLOCK_SIZE:
                    break
        crc_per_block = BLOCK_SIZE // BYTES_PER_CRC if nblocks > 1 else 0
        md5 = hashlib.md5(b"".join(block_md5s)).digest()  # noqa: S324
        raw = struct.pack(">iq", BYTES_PER_CRC, crc_per_block) + md5
        self._json({"FileChecksum": {
            "algorithm": f"MD5-of-{crc_per_block}MD5-of-{BYTES_PER_CRC}CRC32",
            "bytes": raw.hex(), "length": len(raw)}})

    def op_gethomedirectory(self, hdfs_path: str, params: dict[str, str]) -> None:
        self._json({"Path": f"/user/{params.get('user.name') or self.ns.owner}"})

    def op_gettrashroot(self, hdfs_path: str, params: dict[str, str]) -> None:
        self._json({"Path": f"/user/{params.get('user.name') or self.ns.owner}/.Trash"})

    def op_getaclstatus(self, hdfs_path: str, params: dict[str, str]) -> None:
        st = self.ns.status(hdfs_path, self.ns.local(hdfs_path), "")
        self._json({"AclStatus": {"entries": [], "group": st["group"], "owner": st["owner"],
                                  "permission": st["permission"], "stickyBit": False}})

    def op_getserverdefaults(self, hdfs_path: str, params: dict[str, str]) -> None:
        self._json({"FsServerDefaults": {
            "blockSize": BLOCK_SIZE, "bytesPerChecksum": BYTES_PER_CRC,
            "writePacketSize": 65536, "replication": 1, "fileBufferSize": 4096,
            "encryptDataTransfer": False, "trashInterval": 0, "checksumType": 2,
            "keyProviderUri": "", "defaultStoragePolicyId": 7}})

    def op_getfileblocklocations(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        if not local.is_file():
            raise RemoteError("FileNotFoundException", f"File does not exist: {hdfs_path}")
        size = local.stat().st_size
        offset = int(params.get("offset") or 0)
        length = int(params.get("length") or size)
        host, _, port = (self.headers.get("Host") or "127.0.0.1:0").partition(":")
        blocks = []
        for start in range(0, size, BLOCK_SIZE):
            end = min(start + BLOCK_SIZE, size)
            if end <= offset or start >= offset + length:
                continue
            blocks.append({"cachedHosts": [], "corrupt": False, "hosts": [host],
                           "length": end - start, "names": [f"{host}:{port}"],
                           "offset": start, "storageTypes": ["DISK"],
                           "topologyPaths": [f"/default-rack/{host}:{port}"]})
        self._json({"BlockLocations": {"BlockLocation": blocks}})

    # -- writes -----------------------------------------------------------------------
    def op_create(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        overwrite = _bool(params.get("overwrite"), False)
        datanode = _bool(params.get("datanode"), False)
        with self.ns.lock:
            if local.is_dir():
                self._drain()
                raise RemoteError("FileAlreadyExistsException",
                                  f"{hdfs_path} already exists as a directory")
            if local.exists() and not overwrite:
                self._drain()
                raise RemoteError("FileAlreadyExistsException",
                                  f"{hdfs_path} for client {self.client_address[0]} "
                                  "already exists")
            if not datanode:
                self._drain()
                self._redirect(hdfs_path, params)
                return
            self.ns.ensure_parent_dirs(hdfs_path, local)
            fh = local.open("wb")  # visible (empty, growing) from now on, as in HDFS
        with fh:
            perm = params.get("permission")
            os.chmod(local, int(perm, 8) if perm else 0o644)
            for piece in self._body_chunks():
                fh.write(piece)
        self._send(201, b"", "application/octet-stream",
                   {"Location": f"hdfs://{self.headers.get('Host', '')}{quote(hdfs_path)}"})

    def op_append(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        if not local.is_file():
            self._drain()
            raise RemoteError("FileNotFoundException",
                              f"Failed to append to non-existent file {hdfs_path}")
        if not _bool(params.get("datanode"), False):
            self._drain()
            self._redirect(hdfs_path, params)
            return
        with local.open("ab") as fh:
            for piece in self._body_chunks():
                fh.write(piece)
        self._send(200, b"", "application/octet-stream")

    def op_mkdirs(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        with self.ns.lock:
            probe = local
            while probe != self.ns.root and not probe.exists():
                probe = probe.parent
            if probe.exists() and not probe.is_dir():
                raise RemoteError("FileAlreadyExistsException" if probe == local
                                  else "ParentNotDirectoryException",
                                  f"Path is not a directory: {hdfs_path}")
            local.mkdir(parents=True, exist_ok=True)
            perm = params.get("permission")
            if perm:
                os.chmod(local, int(perm, 8))
        self._json({"boolean": True})

    def op_rename(self, hdfs_path: str, params: dict[str, str]) -> None:
        dest = params.get("destination")
        if not dest or not dest.startswith("/"):
            raise RemoteError("IllegalArgumentException",
                              f"Invalid value for webhdfs parameter \"destination\": {dest}")
        options = {o.strip().upper() for o in params.get("renameoptions", "").split(",")
                   if o.strip()}
        if options - {"NONE", "OVERWRITE", "TO_TRASH"}:
            raise RemoteError("IllegalArgumentException", "Invalid value for webhdfs "
                              f"parameter \"renameoptions\": {params['renameoptions']}")
        if self.server.take_rename_fault(dest):
            raise RemoteError("IOException", f"Permission denied: rename {hdfs_path} to "
                              f"{dest} (injected: WebHdfsServer.fail_renames)")
        src, dst = self.ns.local(hdfs_path), self.ns.local(dest)
        with self.ns.lock:
            if not options:  # ClientProtocol.rename: false on any failure
                ok = self._rename_old(src, dst)
                self._json({"boolean": ok})
                return
            # ClientProtocol.rename2: exceptions, OVERWRITE replaces atomically
            if not src.exists():
                raise RemoteError("FileNotFoundException",
                                  f"rename source {hdfs_path} is not found.")
            if not dst.parent.is_dir():
                raise RemoteError("FileNotFoundException",
                                  f"rename destination parent {dest} not found.")
            if dst.exists():
                if "OVERWRITE" not in options:
                    raise RemoteError("FileAlreadyExistsException",
                                      f"rename destination {dest} already exists.")
                if dst.is_dir() != src.is_dir():
                    raise RemoteError("IOException", f"Source {hdfs_path} and destination "
                                                     f"{dest} must both be directories")
                if dst.is_dir() and os.listdir(dst):
                    raise RemoteError("IOException",
                                      f"rename destination directory is not empty: {dest}")
            os.replace(src, dst)
        self._send(200, b"", "application/octet-stream")

    def _rename_old(self, src: Path, dst: Path) -> bool:
        if not src.exists() or src == self.ns.root:
            return False
        if src == dst:
            return src.is_file()
        if dst.is_dir():
            dst = dst / src.name
        if dst.exists() or not dst.parent.is_dir():
            return False
        if src.is_dir() and (dst == src or src in dst.parents):
            return False
        os.rename(src, dst)
        return True

    def op_delete(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        recursive = _bool(params.get("recursive"), False)
        with self.ns.lock:
            if not local.exists():
                self._json({"boolean": False})
                return
            if local == self.ns.root:
                self._json({"boolean": False})
                return
            if local.is_dir():
                if os.listdir(local) and not recursive:
                    raise RemoteError("PathIsNotEmptyDirectoryException",
                                      f"`{hdfs_path} is non empty': Directory is not empty")
                shutil.rmtree(local)
            else:
                local.unlink()
        self._json({"boolean": True})

    def op_setreplication(self, hdfs_path: str, params: dict[str, str]) -> None:
        self._json({"boolean": self.ns.local(hdfs_path).is_file()})

    def op_setpermission(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        self.ns.status(hdfs_path, local, "")
        os.chmod(local, int(params.get("permission") or "755", 8))
        self._send(200, b"", "application/octet-stream")

    def op_setowner(self, hdfs_path: str, params: dict[str, str]) -> None:
        self.ns.status(hdfs_path, self.ns.local(hdfs_path), "")  # ownership is not modelled
        self._send(200, b"", "application/octet-stream")

    def op_settimes(self, hdfs_path: str, params: dict[str, str]) -> None:
        local = self.ns.local(hdfs_path)
        st = self.ns.status(hdfs_path, local, "")
        atime = int(params.get("accesstime") or -1)
        mtime = int(params.get("modificationtime") or -1)
        os.utime(local, ((atime if atime >= 0 else st["accessTime"]) / 1000,
                         (mtime if mtime >= 0 else st["modificationTime"]) / 1000))
        self._send(200, b"", "application/octet-stream")
