"""The one regime key the learner's per-regime posteriors are stored and looked up by.

Exits are tagged with the ticker's crypto volatility regime at entry (``medium_volatility``); the
snapshot used to look posteriors up by the combined label (``high_volatility_unavailable``, BTC's
volatility x the macro quadrant), so the two never met and the regime tables never took effect.
Every regime the learner is given, for learning or for reading, goes through ``regime_key``:

- a label that starts with a volatility level (``low_volatility``, ``medium_volatility``,
  ``high_volatility``), combined or not, keys by that level;
- ``None``, empty or ``unknown`` (no estimate) is no regime: only the global posteriors apply;
- any other label (a custom regime model's) is used as it is, trimmed.
"""

from __future__ import annotations

from typing import Final, TypeVar

T = TypeVar("T")

VOLATILITY_LEVELS: Final = ("low_volatility", "medium_volatility", "high_volatility")
NO_REGIME: Final = frozenset({"", "unknown", "unavailable"})


def regime_key(label: str | None) -> str | None:
    if label is None:
        return None
    text = label.strip()
    if text.lower() in NO_REGIME:
        return None
    for level in VOLATILITY_LEVELS:
        if text.lower().startswith(level):
            return level
    return text


def rekeyed(table: dict[str, T]) -> tuple[dict[str, T], list[str]]:
    """``table`` keyed by ``regime_key`` as a saved model is read (a file's keys were taken as
    they were, and one a person spelt otherwise never matched a regime again), and the keys
    dropped as no regime. ``ValueError`` when two keys are one regime: which to keep is not
    ours to guess."""
    kept: dict[str, T] = {}
    spelt: dict[str, str] = {}
    dropped: list[str] = []
    for label, value in table.items():
        key = regime_key(label)
        if key is None:
            dropped.append(label)
        elif key in kept:
            raise ValueError(f"{spelt[key]!r} and {label!r} are both the regime {key!r}")
        else:
            kept[key], spelt[key] = value, label
    return kept, dropped
