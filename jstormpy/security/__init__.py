"""Security: the per-topology secret's request tokens and the per-topology
TLS material (CA, certificates, SSL contexts, gRPC credentials).
"""
