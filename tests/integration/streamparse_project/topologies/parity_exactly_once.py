"""The parity topology, run exactly-once: its spout emits with ids and re-emits on fail."""

from parity import Parity  # noqa: F401 - the streamparse topology, from the file beside

from jstormpy import Config

config = Config(guarantee="exactly_once", checkpoint_interval_ms=200)
