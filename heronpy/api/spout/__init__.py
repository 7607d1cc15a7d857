"""heronpy spouts (``heronpy.api.spout``)."""
