"""jstormpy benchmark suite: ``python -m bench`` runs every script and prints one table."""
