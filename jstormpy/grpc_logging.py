"""gRPC's C core logging, quiet by default: its INFO lines (a GOAWAY when a Topology
Master stops while a client's long poll is open, a TLS handshake a peer broke off) went to
the user's console, where `jstorm run` prints progress and results. Set before gRPC is
imported; a ``GRPC_VERBOSITY`` or ``GLOG_minloglevel`` the user set wins (``GRPC_VERBOSITY
=INFO`` brings them back). Child processes (the zygote, the TM, the workers) inherit it."""

from __future__ import annotations

import os


def quiet_grpc_logging() -> None:
    """Only gRPC's errors reach stderr, unless the environment says otherwise."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("GLOG_minloglevel", "2")  # absl's ERROR, which gRPC logs through
