"""The crypto volatility regime's labels: what a decision's ``regime`` is for each ticker, what a
trade and a lesson are stored under in the memory graph, what the learner keys on. Apart from the
model (numpy, the fits) so a command line can check a name without loading it."""

from __future__ import annotations

from enum import StrEnum


class CryptoLabel(StrEnum):
    LOW = "low_volatility"
    MEDIUM = "medium_volatility"
    HIGH = "high_volatility"
    UNKNOWN = "unknown"  # no view yet (too little history, a failed fit): decisions use it too


__all__ = ["CryptoLabel"]
