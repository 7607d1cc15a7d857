"""The jstorm command line (main) and its subcommands, and the client of a
Topology Master that the CLI and TopologyHandle use.
"""
