"""What heronpy spouts and bolts share (``heronpy.api.component``)."""
