"""Reading the exchange's answers: every field the ccxt broker acts on, checked before it is used.

Binance sends numbers as strings (``"positionAmt": "0.010"``). ``float()`` alone reads ``"NaN"``,
``"inf"``, ``"1e400"``, ``" 5"`` and fullwidth digits as numbers, and a missing key, a ``null`` or a list
where a row should be raised ``KeyError`` or ``TypeError`` from deep in a decision. A position of
NaN BTC would then be tracked, valued and sold. So each field is read here: a decimal as Binance
writes one (``market.wire.number``, the websocket frames' reading) or a JSON number, not a bool,
finite, within 1e15 and its own bound; an answer that is not is a
``MalformedAnswerError``, a ``RetryableError`` naming the request, the field and the value: the
caller acts on nothing from it and asks again after its backoff, as when the exchange is down.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, Final

from core.errors import RetryableError
from market.wire import number as wire_number

#: no balance, price or quantity of an account vigil trades comes near this: a value beyond it is
#: a garbled answer, not a market
MAX_MAGNITUDE: Final = 1e15
#: longest value quoted back in an error
_SHOWN_CHARS: Final = 60


class MalformedAnswerError(RetryableError):
    """The exchange answered, but not with what its API documents."""


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= _SHOWN_CHARS else text[: _SHOWN_CHARS - 3] + "..."


def row(value: object, what: str) -> Mapping[str, Any]:
    """A JSON object of the answer to ``what``."""
    if not isinstance(value, Mapping):
        raise MalformedAnswerError(
            f"the exchange's answer to {what} is not an object: {_shown(value)}"
        )
    return value


def rows(value: object, what: str) -> list[Mapping[str, Any]]:
    """The answer to ``what`` as a list of JSON objects."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise MalformedAnswerError(
            f"the exchange's answer to {what} is not a list: {_shown(value)}"
        )
    return [row(item, what) for item in value]


def text(answer: Mapping[str, Any], key: str, what: str) -> str:
    """A non-empty string field."""
    value = answer.get(key)
    if not isinstance(value, str) or not value:
        raise MalformedAnswerError(
            f"the exchange's answer to {what}: {key} is not a non-empty string: {_shown(value)}"
        )
    return value


def number(
    answer: Mapping[str, Any],
    key: str,
    what: str,
    *,
    default: float | None = None,
    at_least: float | None = None,
    above: float | None = None,
) -> float:
    """A finite number field, from a decimal string or a JSON number; ``default`` when the key
    is absent, null or ``""`` (None: it must be there); ``at_least`` / ``above`` bound it."""
    value = answer.get(key)
    if value is None or value == "":
        if default is None:
            raise MalformedAnswerError(f"the exchange's answer to {what} has no {key}")
        return default
    parsed = _parsed(value)
    if parsed is None:
        raise MalformedAnswerError(
            f"the exchange's answer to {what}: {key} is not a number within "
            f"+-{MAX_MAGNITUDE:g}: {_shown(value)}"
        )
    if (at_least is not None and parsed < at_least) or (above is not None and parsed <= above):
        bound = f">= {at_least:g}" if at_least is not None else f"> {above:g}"
        raise MalformedAnswerError(
            f"the exchange's answer to {what}: {key} must be {bound}, got {_shown(value)}"
        )
    return parsed


def whole_number(
    answer: Mapping[str, Any], key: str, what: str, *, default: int | None = None
) -> int:
    """A non-negative integer field (an id, a time in ms); ``default`` when the key is absent,
    null or ``""`` (None: it must be there)."""
    value = answer.get(key)
    if value is None or value == "":
        if default is None:
            raise MalformedAnswerError(f"the exchange's answer to {what} has no {key}")
        return default
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 19:
        return int(value)
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63:
        return value
    raise MalformedAnswerError(
        f"the exchange's answer to {what}: {key} is not a whole number: {_shown(value)}"
    )


def _parsed(value: object) -> float | None:
    try:
        parsed = wire_number(value)  # the websocket frames' reading: one idea of a Binance number
    except (TypeError, ValueError, OverflowError):
        return None
    return parsed if math.isfinite(parsed) and abs(parsed) <= MAX_MAGNITUDE else None


__all__ = ["MAX_MAGNITUDE", "MalformedAnswerError", "number", "row", "rows", "text", "whole_number"]
