"""Stateful heronpy components (``heronpy.api.state``)."""
