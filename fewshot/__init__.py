"""fewshot: few-shot episodic learning and deep metric learning in JAX/Flax."""

__version__ = "0.1.0"

from fewshot.api import TrainedModel, build, load  # noqa: E402

__all__ = ["TrainedModel", "build", "load", "__version__"]
