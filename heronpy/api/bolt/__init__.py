"""heronpy bolts (``heronpy.api.bolt``)."""
