"""Faithfulness of the WebHDFS test server, checked with an independent real client:
HdfsCLI (the ``hdfs`` package), plus raw HTTP for the protocol details Hadoop's Java
client relies on (redirects, ``noredirect``, error documents and status codes)."""

from __future__ import annotations

import hashlib
import json
import struct
import zlib
from pathlib import Path

import hdfs
import pytest
import requests

from jstormpy.testing.servers.webhdfs import WebHdfsServer, main


@pytest.fixture
def client(webhdfs_server: WebHdfsServer) -> hdfs.InsecureClient:
    return hdfs.InsecureClient(webhdfs_server.url, user="alice")


def test_write_read_round_trip(client: hdfs.InsecureClient) -> None:
    client.write("/d/a.bin", data=b"hello")
    with client.write("/d/b.bin") as writer:  # streamed (chunked) upload
        for _ in range(100):
            writer.write(b"x" * 10_000)
    client.write("/d/c.txt", data=(s.encode() for s in ["l1\n", "l2\n"]))  # generator
    with client.read("/d/a.bin") as reader:
        assert reader.read() == b"hello"
    with client.read("/d/b.bin") as reader:
        assert reader.read() == b"x" * 1_000_000
    with client.read("/d/a.bin", offset=1, length=3) as reader:
        assert reader.read() == b"ell"
    with client.read("/d/b.bin", chunk_size=65536) as chunks:
        assert sum(len(c) for c in chunks) == 1_000_000
    with client.read("/d/c.txt", encoding="utf-8", delimiter="\n") as lines:
        assert [line for line in lines if line] == ["l1", "l2"]


def test_overwrite_and_append(client: hdfs.InsecureClient) -> None:
    client.write("/f", data=b"one")
    with pytest.raises(hdfs.HdfsError) as info:
        client.write("/f", data=b"two")
    assert info.value.exception == "FileAlreadyExistsException"
    client.write("/f", data=b"two", overwrite=True)
    client.write("/f", data=b"+three", append=True)
    with client.read("/f") as reader:
        assert reader.read() == b"two+three"
    with pytest.raises(hdfs.HdfsError) as info:
        client.write("/nope", data=b"x", append=True)
    assert info.value.exception == "FileNotFoundException"


def test_a_refused_create_says_it_closes_its_connection(webhdfs_server: WebHdfsServer) -> None:
    """A refused CREATE (its body may be unread) closes the connection and says so in a
    ``Connection: close`` header; without the header a client's pool reused the closing
    connection for its next request and got "Remote end closed connection without
    response" (a CI failure of test_overwrite_and_append). Answers that keep the
    connection open do not carry it."""
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", webhdfs_server.port, timeout=10)
    try:
        conn.request("PUT", "/webhdfs/v1/g?op=MKDIRS")
        ok = conn.getresponse()
        ok.read()
        assert ok.status == 200 and ok.getheader("Connection") is None
        conn.request("PUT", "/webhdfs/v1/g?op=CREATE&overwrite=false", body=b"x")
        refused = conn.getresponse()
        assert json.loads(refused.read())["RemoteException"]["exception"] == \
            "FileAlreadyExistsException"
        assert refused.getheader("Connection") == "close"
    finally:
        conn.close()


def test_status_list_walk(client: hdfs.InsecureClient) -> None:
    client.makedirs("/a/b/c", permission="750")
    client.write("/a/f1", data=b"12345")
    client.write("/a/b/f2", data=b"")
    st = client.status("/a/f1")
    assert st["type"] == "FILE" and st["length"] == 5 and st["permission"] == "644"
    assert st["pathSuffix"] == "" and st["owner"] and st["blockSize"] > 0
    assert client.status("/a/b/c")["type"] == "DIRECTORY"
    assert client.status("/a/b/c")["permission"] == "750"
    assert client.status("/missing", strict=False) is None
    with pytest.raises(hdfs.HdfsError) as info:
        client.status("/missing")
    assert info.value.exception == "FileNotFoundException"
    assert client.list("/a") == ["b", "f1"]
    assert dict(client.list("/a", status=True))["f1"]["length"] == 5
    with pytest.raises(hdfs.HdfsError):
        client.list("/a/f1")  # not a directory
    walked = list(client.walk("/a"))
    assert walked[0] == ("/a", ["b"], ["f1"])
    assert ("/a/b", ["c"], ["f2"]) in walked


def test_rename_semantics(client: hdfs.InsecureClient) -> None:
    client.write("/r/src", data=b"s")
    client.write("/r/dst", data=b"d")
    client.makedirs("/r/dir")
    with pytest.raises(hdfs.HdfsError):
        client.rename("/r/src", "/r/dst")  # HDFS rename never overwrites a file
    client.rename("/r/src", "/r/dir")  # into an existing directory
    assert client.list("/r/dir") == ["src"]
    with pytest.raises(hdfs.HdfsError):
        client.rename("/r/dir/src", "/nonexistent/parent/x")
    with pytest.raises(hdfs.HdfsError):
        client.rename("/r/missing", "/r/x")
    client.rename("/r/dir/src", "/r/moved")
    with client.read("/r/moved") as reader:
        assert reader.read() == b"s"


def test_rename_with_overwrite_option(client: hdfs.InsecureClient) -> None:
    """``renameoptions=OVERWRITE`` (ClientProtocol.rename2), as the NameNode offers it."""
    client.write("/o/a", data=b"new")
    client.write("/o/b", data=b"old")
    with pytest.raises(hdfs.HdfsError) as info:
        client._rename("/o/a", destination="/o/b", renameoptions="NONE")
    assert info.value.exception == "FileAlreadyExistsException"
    client._rename("/o/a", destination="/o/b", renameoptions="OVERWRITE")
    with client.read("/o/b") as reader:
        assert reader.read() == b"new"
    client.write("/o/c", data=b"c")
    with pytest.raises(hdfs.HdfsError) as info:
        client._rename("/o/c", destination="/o/b", renameoptions="TO_TRASH")
    assert info.value.exception == "FileAlreadyExistsException"


def test_delete_makedirs_content_checksum(client: hdfs.InsecureClient) -> None:
    client.write("/x/y/f", data=b"abc")
    client.write("/x/g", data=b"defg")
    summary = client.content("/x")
    assert summary["fileCount"] == 2 and summary["length"] == 7
    assert summary["directoryCount"] == 2
    assert client.content("/x/g")["fileCount"] == 1
    assert client.content("/missing", strict=False) is None
    data = b"z" * 1300
    client.write("/x/sum", data=data)
    checksum = client.checksum("/x/sum")
    crcs = b"".join(struct.pack(">I", zlib.crc32(data[i:i + 512])) for i in range(0, 1300, 512))
    expected = struct.pack(">iq", 512, 0) + hashlib.md5(hashlib.md5(crcs).digest()).digest()
    assert checksum == {"algorithm": "MD5-of-0MD5-of-512CRC32", "bytes": expected.hex(),
                        "length": 28}
    with pytest.raises(hdfs.HdfsError) as info:
        client.delete("/x")
    assert info.value.exception == "PathIsNotEmptyDirectoryException"
    assert client.delete("/x/g") is True
    assert client.delete("/x", recursive=True) is True
    assert client.delete("/x") is False
    client.write("/plain", data=b"")
    with pytest.raises(hdfs.HdfsError) as info:
        client.makedirs("/plain/under")
    assert info.value.exception == "ParentNotDirectoryException"


def test_set_attributes(client: hdfs.InsecureClient) -> None:
    client.write("/p", data=b"1")
    client.set_permission("/p", "600")
    assert client.status("/p")["permission"] == "600"
    client.set_times("/p", modification_time=1_000_000_000_000)
    assert client.status("/p")["modificationTime"] == 1_000_000_000_000
    client.set_replication("/p", 2)
    client.set_owner("/p", owner="bob")
    assert client.acl_status("/p")["permission"] == "600"


def test_protocol_details(webhdfs_server: WebHdfsServer) -> None:
    base = f"{webhdfs_server.url}/webhdfs/v1"
    res = requests.put(f"{base}/p/file?op=CREATE&user.name=u", allow_redirects=False,
                       timeout=5)
    assert res.status_code == 307
    loc = res.headers["Location"]
    res = requests.put(loc, data=b"payload", timeout=5)
    assert res.status_code == 201
    res = requests.get(f"{base}/p/file?op=OPEN&noredirect=true", timeout=5)
    assert res.status_code == 200 and res.headers["Content-Type"] == "application/json"
    assert requests.get(res.json()["Location"], timeout=5).content == b"payload"
    res = requests.get(f"{base}/p/nothing?op=GETFILESTATUS", timeout=5)
    assert res.status_code == 404
    assert res.json() == {"RemoteException": {
        "exception": "FileNotFoundException", "javaClassName": "java.io.FileNotFoundException",
        "message": "File does not exist: /p/nothing"}}
    res = requests.get(f"{base}/p?op=NOSUCHOP", timeout=5)
    assert res.status_code == 400
    assert res.json()["RemoteException"]["exception"] == "IllegalArgumentException"
    assert "Invalid value for webhdfs parameter" in res.json()["RemoteException"]["message"]
    res = requests.get(f"{base}/?op=GETHOMEDIRECTORY&user.name=carol", timeout=5)
    assert res.json() == {"Path": "/user/carol"}
    res = requests.get(f"{base}/p/file?op=GETFILEBLOCKLOCATIONS", timeout=5)
    block = res.json()["BlockLocations"]["BlockLocation"][0]
    assert block["offset"] == 0 and block["length"] == 7
    listing = requests.get(f"{base}/p/file?op=LISTSTATUS", timeout=5).json()
    assert [s["pathSuffix"] for s in listing["FileStatuses"]["FileStatus"]] == [""]
    assert json.loads(requests.get(f"{base}/p?op=MKDIRS", timeout=5).text)[
        "RemoteException"]["exception"] == "IllegalArgumentException"  # wrong HTTP method


def test_restart_keeps_files_and_port(tmp_path: Path) -> None:
    server = WebHdfsServer(tmp_path / "r").start()
    try:
        client = hdfs.InsecureClient(server.url)
        client.write("/keep", data=b"k")
        port = server.port
        server.stop()
        with pytest.raises(requests.ConnectionError):
            client.status("/keep")
        server.start()
        assert server.port == port
        with client.read("/keep") as reader:
            assert reader.read() == b"k"
    finally:
        server.stop()


def test_main_rejects_a_bad_port(capsys: pytest.CaptureFixture[str]) -> None:
    # --root is optional (a printed temp dir, tests/state_backends/test_testing_cli.py)
    with pytest.raises(SystemExit):
        main(["--port", "nope"])
    assert "--port" in capsys.readouterr().err


def test_failed_renames_refuse_one_destination_and_heal(webhdfs_server: WebHdfsServer) -> None:
    """``fail_renames`` (the chaos classes ``metadata_write_error`` and
    ``tm_generation_write_error``): a matching write-by-rename fails with a permanent
    error the backend reports, every other write goes on, and healing restores it."""
    from jstormpy.api.errors import BackendError
    from jstormpy.state_backends import open_backend

    backend = open_backend(f"hdfs://127.0.0.1:{webhdfs_server.port}/ckpt", retries=1,
                           backoff_s=0.01, timeout_s=5)
    backend.put_meta("generation", b"1")
    webhdfs_server.fail_renames(r"/ckpt/meta/generation/v-\d+", -1)
    for _ in range(2):
        with pytest.raises(BackendError, match="fail_renames"):
            backend.put_meta("generation", b"2")
    backend.put_meta("completed_checkpoint", b"7")  # another key: served
    backend.put_object("chk-0000000003/_metadata", b"{}")
    assert backend.get_meta("generation") == b"1"
    assert len(webhdfs_server.renames_failed) == 2
    assert all(d.startswith("/ckpt/meta/generation/v-") for d in webhdfs_server.renames_failed)
    webhdfs_server.fail_renames(r"/ckpt/meta/generation/v-\d+", 0)
    backend.put_meta("generation", b"3")
    assert backend.get_meta("generation") == b"3"
    webhdfs_server.fail_renames(r"/ckpt/chk-\d+/_metadata", 1)  # one write only
    with pytest.raises(BackendError):
        backend.put_object("chk-0000000004/_metadata", b"{}")
    backend.put_object("chk-0000000005/_metadata", b"{}")
    assert backend.get_object("chk-0000000005/_metadata") == b"{}"
