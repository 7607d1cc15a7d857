"""Malicious code packages are refused before anything is unpacked, naming the entry."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest

from jstormpy.api.errors import UnsafePackageError
from jstormpy.operations.codepkg import PackageStore, load_package_topology

GOOD = "from jstormpy import TopologyBuilder\n"


def make_zip(*entries: tuple[str, bytes], link: str = "") -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("topology.py", GOOD)
        for name, data in entries:
            zf.writestr(name, data)
        if link:
            info = zipfile.ZipInfo(link)
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, "/etc")
    return buf.getvalue()


@pytest.mark.parametrize(("data", "entry", "why"), [
    (make_zip(("../../evil.py", b"x")), "../../evil.py", "outside"),
    (make_zip(("pkg/../../evil.py", b"x")), "pkg/../../evil.py", "outside"),
    (make_zip(("/tmp/evil.py", b"x")), "/tmp/evil.py", "outside"),
    (make_zip(("C:/evil.py", b"x")), "C:/evil.py", "outside"),
    (make_zip(("..\\evil.py", b"x")), "..\\evil.py", "outside"),
    (make_zip(link="lib"), "lib", "symbolic link"),
    (make_zip(("bomb.txt", b"\0" * (20 << 20))), "bomb.txt", "zip bomb"),
    (make_zip(("huge.bin", b"\0" * (65 << 20))), "huge.bin", "unpacks to"),
])
def test_malicious_package_is_refused_naming_the_entry(tmp_path, data, entry, why):
    with pytest.raises(UnsafePackageError, match=why) as err:
        PackageStore(tmp_path).add(data, "topology.py")  # what Upgrade does first
    assert repr(entry) in str(err.value)
    assert not list((tmp_path / "code").glob("*.zip")), "nothing stored"
    with pytest.raises(UnsafePackageError):  # a worker refuses it too
        load_package_topology(data, "topology.py", "", "v9")
    assert not (tmp_path.parent / "evil.py").exists()


def test_too_many_entries(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for i in range(10_001):
            zf.writestr(f"m{i}.py", "")
    with pytest.raises(UnsafePackageError, match="10001 entries"):
        PackageStore(tmp_path).add(buf.getvalue(), "m0.py")


def test_an_honest_package_with_subpackages_still_loads(tmp_path):
    data = make_zip(("lib/__init__.py", b""), ("lib/words.py", b"X = 1\n"),
                    ("data/big.txt", b"ab" * 100_000))
    assert PackageStore(tmp_path).add(data, "topology.py") == "v2"
