"""Deep metric learning: losses, miners, the C x M batch sampler and retrieval metrics.

Every distance comes from :mod:`fewshot.distances`, shared with the few-shot heads.
"""
