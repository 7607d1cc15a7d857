"""Reading the options a RocksDB database runs with, as RocksDB itself wrote them (its
newest ``OPTIONS-*`` file), for the store's option tests."""

from __future__ import annotations

import re
from pathlib import Path


def options_section(db_dir: Path, section: str, family: str) -> dict[str, str]:
    """The ``[<section> "<family>"]`` section (``CFOptions``,
    ``TableOptions/BlockBasedTable``) of the newest OPTIONS file RocksDB wrote in
    ``db_dir``."""
    newest = max(db_dir.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    current, found = None, {}
    for line in newest.read_text().splitlines():
        head = re.match(r'\s*\[([\w/]+)(?: "(.*)")?\]', line)
        if head:
            current = (head.group(1), (head.group(2) or "").replace("\\:", ":"))
        elif current == (section, family) and "=" in line:
            name, _, value = line.strip().partition("=")
            found[name] = value
    assert found, f"no {section} of column family {family} in {newest}"
    return found
