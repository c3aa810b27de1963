"""Differential graph fuzzer: random programs compiled with a dicp backend, compared with eager.

`python -m dicp.tools.fuzz --help`; the README's "Differential fuzzer" section describes it.
"""
