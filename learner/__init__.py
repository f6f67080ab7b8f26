"""vigil.learner: Thompson sampling over signal sources (global and per-regime Beta posteriors)."""

from learner.online import OnlineLearner

__all__ = ["OnlineLearner"]
