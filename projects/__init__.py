"""Research projects built on fewshot, each in a folder of its own: ``dr_ratio/``, the DR paper's claims tested with
seeds (docs/results.md).
"""
