"""The user API: components, topologies, configuration, errors, the batch view,
restart strategies and failure reports. Of the rest of jstormpy it imports only
run_identity (and, late, barrier's Sink contract); everything else may import it.
"""
