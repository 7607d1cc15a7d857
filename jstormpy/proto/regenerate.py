"""Regenerate the protobuf/gRPC stubs: ``python -m jstormpy.proto.regenerate``.

``tests/unit/test_proto_stubs.py`` fails when the committed stubs are stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def generate(out_dir: Path) -> None:
    """Run grpc_tools.protoc on jstorm.proto, writing the stubs into ``out_dir``."""
    from grpc_tools import protoc  # type: ignore[import-untyped]

    out_dir.mkdir(parents=True, exist_ok=True)
    args = ["protoc", f"-I{HERE}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
            f"--grpc_python_out={out_dir}",
            str(HERE / "jstorm.proto")]
    if protoc.main(args) != 0:
        raise SystemExit("protoc failed")
    grpc_file = out_dir / "jstorm_pb2_grpc.py"
    text = grpc_file.read_text()
    # make the generated import package-relative
    grpc_file.write_text(text.replace("import jstorm_pb2 as jstorm__pb2",
                                      "from jstormpy.proto import jstorm_pb2 as jstorm__pb2"))


if __name__ == "__main__":
    generate(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
