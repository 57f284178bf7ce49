"""fewshot: few-shot episodic learning and deep metric learning in JAX/Flax."""

__version__ = "0.1.0"
