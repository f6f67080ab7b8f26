"""Numbers no setting may hold, whatever its own bounds say: infinity, NaN, and durations past any
use. Most fields bound only one side (``gt=0``), so ``inf`` or ``1e308`` passed, and the daemon
died at start-up with a traceback turning seconds into milliseconds (``round(inf)``), or ran with a
timeout that can never fire. Checked over the whole settings tree by the names' units (``_secs``,
``_ms``, ``_hours``, ``_days``, ``_months``: a house rule), so a new setting is covered without a bound of its own.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from pathlib import Path

from pydantic import BaseModel

from core.errors import RefuseToStartError

_YEARS = 100  # longer than any deployment: a wait or an age beyond it is a mistake
_DAY_SECS = 86_400
#: the largest value of a duration by the unit its name ends with
DURATION_MAX = {
    "_secs": _YEARS * 365 * _DAY_SECS,
    "_hours": _YEARS * 365 * 24,
    "_months": _YEARS * 12,
    "_ms": _YEARS * 365 * _DAY_SECS * 1000,
    "_days": _YEARS * 365,
}


def refuse_unusable_numbers(settings: BaseModel, toml_file: Path | None) -> None:
    """``RefuseToStartError`` naming every unusable number in ``settings``, if there is one."""
    unusable = unusable_numbers(settings)
    if unusable:
        where = f" (sources: {toml_file}, VIGIL_* environment)" if toml_file else ""
        raise RefuseToStartError("\n".join([f"invalid configuration{where}:", *unusable]))


def unusable_numbers(model: BaseModel) -> list[str]:
    """One line per number in ``model`` (and the models, lists and tables in it) that is not
    finite, or is a duration longer than ``DURATION_MAX`` says: ``name = value: why``."""
    return [
        f"  {name} = {value!r}: {why}" for name, value, why in _walk(model, "") if why is not None
    ]


def _walk(value: object, name: str) -> Iterator[tuple[str, object, str | None]]:
    if isinstance(value, BaseModel):
        for field in type(value).model_fields:
            yield from _walk(getattr(value, field), f"{name}.{field}" if name else field)
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _walk(item, f"{name}.{key}")
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _walk(item, f"{name}[{index}]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield name, value, _why(name, value)


def _why(name: str, value: float) -> str | None:
    if not math.isfinite(value):
        return "must be a finite number"
    for unit, most in DURATION_MAX.items():
        if name.endswith(unit) and value > most:
            return f"longer than {_YEARS} years ({most:,} at most)"
    return None
