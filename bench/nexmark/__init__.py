"""Nexmark on jstormpy beside Bytewax and PyFlink (docs/nexmark.md).

    python -m bench.nexmark generate --events N --seed S --out events.jsonl
    python -m bench.nexmark run --query q5 --events events.jsonl --out DIR [--engine ...]
    python -m bench.nexmark suite
"""
