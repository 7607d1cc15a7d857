"""heronpy's topology API (Heron's ``heronpy.api``), implemented on jstormpy."""
