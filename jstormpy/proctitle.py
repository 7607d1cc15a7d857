"""Process titles: ``ps`` and ``top`` show ``jstorm TM NAME`` and ``jstorm worker N NAME``
instead of ``python -m jstormpy.deploy.forkserver`` for every process of a topology."""

from __future__ import annotations

import contextlib


def set_process_title(title: str) -> None:
    """Set this process's title (what ``ps``/``top`` show) if ``setproctitle`` is
    installed; otherwise leave it as it is."""
    with contextlib.suppress(ImportError):
        import setproctitle

        setproctitle.setproctitle(title)
