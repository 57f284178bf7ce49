"""Few-shot episodic learning: episodes, the episodic learner, its experiment and evaluators, the diagnostics.

* :mod:`~fewshot.episodic.episodes`: an N-way K-shot episode and how it is drawn (:func:`draw` one in Python);
* :mod:`~fewshot.episodic.learning`: :class:`EpisodicLearner` and its pure steps (``train_step``, ``train_chunk``,
  ``evaluate``) on the shared chunk driver of :mod:`fewshot.training`;
* :mod:`~fewshot.episodic.maml`: MAML and ANIL (:class:`~fewshot.episodic.maml.MetaLearner`), their steps on the
  same chunk driver; :mod:`~fewshot.episodic.baseline_pp`: Baseline++ (a cosine classifier over the training
  classes, fitted anew on each test episode's supports); :mod:`~fewshot.episodic.methods`: each method's row of
  :mod:`fewshot.method_rows` (``--method``) resolved into its steps and learner;
* :mod:`~fewshot.episodic.diagnostics`: what one update did to an episode's embeddings (the DR paper's Sec. 3.1);
* :mod:`~fewshot.episodic.learners`: a configuration's learner (its method's), episode shapes and transforms, and
  the head and backbone values passed from Python;
* :mod:`~fewshot.episodic.experiment`: a :class:`~fewshot.config.Config` built into data, learner and keys, and
  the method's side of :mod:`fewshot.training.trainer` (``python -m fewshot.train``'s chunk, rows and test);
* :mod:`~fewshot.episodic.evaluators`: the experiment's evaluators, ``run(state) -> dict`` (the test episodes, the
  same over the test split embedded once, Lake's runs): the run's test, ``python -m fewshot.evaluate`` and the
  reproductions call them; :mod:`~fewshot.episodic.cached_episodes` and :mod:`~fewshot.episodic.lake` do their work
  (the test split embedded once; Lake et al.'s one-shot runs, read and scored), and
  :mod:`~fewshot.episodic.lake_design` draws random runs of Lake's design from the image files.

Stands on :mod:`fewshot.training`, :mod:`fewshot.records`, :mod:`fewshot.augment`, :mod:`fewshot.data` and the
research modules at the package root (heads, backbones, distances); nothing outside imports it but the commands
and :mod:`fewshot.api`.

May import: kernel, research, config, data, augment, analysis, training (docs/architecture.md, "Layers").
"""

from fewshot.episodic.episodes import Episode, EpisodeShape, draw, episode_from_images, sample_episode
from fewshot.episodic.learning import EpisodicLearner, episode_accuracies, init_state, train_chunk, train_step

__all__ = ["Episode", "EpisodeShape", "EpisodicLearner", "draw", "episode_accuracies", "episode_from_images", "init_state",
           "sample_episode", "train_chunk", "train_step"]
