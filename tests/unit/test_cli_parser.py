"""CLI flags that would be accepted and mean nothing are refused."""

from __future__ import annotations

import pytest

from jstormpy.cli.main import build_parser


def test_kill_has_no_json_flag(capsys):
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["kill", "wordcount", "--json"])
    assert exc.value.code == 2
    assert "unrecognized arguments: --json" in capsys.readouterr().err


def test_loglevel_takes_the_config_levels(capsys):
    from jstormpy.api.config import LOG_LEVELS, Config
    from jstormpy.api.errors import ConfigError

    for level in LOG_LEVELS:
        assert build_parser().parse_args(["loglevel", "t", "c", level.lower()]).level == level
        Config(log_level=level).validate()
    with pytest.raises(SystemExit):
        build_parser().parse_args(["loglevel", "t", "c", "CRITICAL"])
    with pytest.raises(ConfigError):
        Config(log_level="CRITICAL").validate()
