"""Differential graph fuzzer: random programs compiled with a dicp backend, compared with eager.

`python -m dicp.tools.fuzz --help`; docs/fuzz.md describes it.
"""
