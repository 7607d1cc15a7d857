"""The heronpy API, served by jstormpy: Heron topologies run unmodified on this engine.

Heron shipped Storm's API so that Storm topologies ran on it; jstormpy ships heronpy's
public API (the same module paths: ``heronpy.api.topology``, ``heronpy.api.bolt.bolt``,
``heronpy.api.spout.spout``, ``heronpy.api.stream``, ``heronpy.api.state``, ...) so that a
heronpy topology file imports it and runs with ``jstorm run FILE``. The components run
in-process in jstormpy tasks (:mod:`jstormpy.heron`); the real heronpy package is not
needed (docs/coming-from.md, "Heron").
"""
