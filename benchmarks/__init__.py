"""Benchmarks: the shapes fewshot trains timed beside an older commit and eager PyTorch, seed groups, streaming,
retrieval, the device check (docs/speed.md). Commands: ``python -m benchmarks.<name>``.
"""
