"""Metric-learning losses: pure jittable functions ``(embeddings, labels, ...) -> scalar``."""
