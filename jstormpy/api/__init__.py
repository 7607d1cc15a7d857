"""The user API: components, topologies, configuration, errors, the batch view,
restart strategies and failure reports. Imports nothing else of jstormpy but keygroups
and run_identity; everything else imports it.
"""
