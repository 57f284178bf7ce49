"""The DR paper's claims tested with seeds: the runs it needs (``dr_grid``), the preregistered block (``dr_prereg``), the
verdicts (``dr_claims``), tables and provenance, and the page, ``python -m projects.dr_ratio.dr_results`` (docs/results.md).
"""
