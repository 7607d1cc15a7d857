"""Every ``ShellProcess`` a test starts is closed at its end, so its process is gone and
its pid directory removed (``/tmp/jstorm-multilang-*``), also when the test stopped at a
failure it provoked on purpose."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from jstormpy.multilang.protocol import ShellProcess


@pytest.fixture(autouse=True)
def close_shell_processes(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    started: list[ShellProcess] = []
    init = ShellProcess.__init__

    def tracked(self: ShellProcess, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        started.append(self)

    monkeypatch.setattr(ShellProcess, "__init__", tracked)
    yield
    for proc in started:
        proc.close(grace_s=0.5)
