"""The committed protobuf/gRPC stubs match jstorm.proto (fails when they are stale)."""

from __future__ import annotations

from pathlib import Path

import pytest

import jstormpy.proto
from jstormpy.proto.regenerate import generate

pytest.importorskip("grpc_tools")

PROTO_DIR = Path(jstormpy.proto.__file__).resolve().parent


@pytest.mark.parametrize("name", ["jstorm_pb2.py", "jstorm_pb2_grpc.py"])
def test_committed_stubs_are_up_to_date(tmp_path, name):
    generate(tmp_path)
    fresh = (tmp_path / name).read_text()
    committed = (PROTO_DIR / name).read_text()
    assert fresh == committed, (
        f"jstormpy/proto/{name} is stale: run `python -m jstormpy.proto.regenerate` "
        "and commit the result")


def test_regenerated_grpc_stub_imports_the_package_module(tmp_path):
    generate(tmp_path)
    text = (tmp_path / "jstorm_pb2_grpc.py").read_text()
    assert "from jstormpy.proto import jstorm_pb2 as jstorm__pb2" in text
    assert "\nimport jstorm_pb2" not in text
