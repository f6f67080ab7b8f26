"""A snapshot's rounded and compact forms read from its fields where pydantic's JSON dump would
only copy them.

``MarketSnapshot.forms`` walked ``model_dump(mode="json")``. Two parts of that were work done
again for nothing: pydantic inferring the types of the ``Any`` fields (the learner's posteriors,
the recent trades, the memory items: plain JSON already; two thirds of the dump), and the
tickers' timeframe summaries, a new object only when their candle closes (three in four
decisions hold the very ones of the decision before), dumped and walked every time.

Here the ``Any`` fields' values are walked as they are when they are exact JSON (what the dump
would copy unchanged: ``snapshot_walks.exact_pair``), each ticker's floats are read from its
model, and a timeframe summary's pair is kept while the snapshot holds the same object with the
same field values. Anything else (a tuple, a subclass, a NaN, a model, an int in a float field,
a key that is no str, odd names) answers ``None``, and the caller walks the dump as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from pydantic import BaseModel

from agent.indicators import TimeframeSummary
from agent.memo import remember
from agent.snapshot_walks import (
    NOT_SENT,
    KeptForms,
    NotExact,
    both_float,
    exact_pair,
    rounded_and_compact,
)
from core.unvalidated import require_plain

Pair = tuple[Any, Any]
_NO_REASONS: Final[dict[str, Any]] = {}
#: names a walk treats apart (reasons, fields not sent): a ticker or timeframe of such a name
#: goes the dump's way
_ODD_NAMES: Final = frozenset({"unavailable", *NOT_SENT})

_SUMMARY_FIELDS: Final = ("trend", "bollinger_position", "rsi", "unavailable")
require_plain(TimeframeSummary, frozenset(_SUMMARY_FIELDS))


class SummaryPairs:
    """The pair of a timeframe summary's dump, kept by the summary's identity, and taken again
    only while its fields are the very same objects and its reasons map is equal to a copy made
    with the pair (a frozen model's map can still be changed in place)."""

    def __init__(self, size: int = 256) -> None:
        self._size = size
        self._entries: dict[
            int, tuple[TimeframeSummary, tuple[Any, ...], dict[str, str], Pair]
        ] = {}

    def pair(self, summary: TimeframeSummary) -> Pair:
        fields = summary.__dict__
        entry = self._entries.get(id(summary))
        if (
            entry is not None
            and entry[0] is summary
            and entry[1][0] is fields["trend"]
            and entry[1][1] is fields["bollinger_position"]
            and entry[1][2] is fields["rsi"]
            and entry[2] == fields["unavailable"]
        ):
            return entry[3]
        pair = rounded_and_compact(summary.model_dump(mode="json"))
        reasons = fields["unavailable"]
        # only an exact str map is kept to compare with: then equal means dumped alike
        if type(reasons) is dict and all(
            type(k) is str and type(v) is str for k, v in reasons.items()
        ):
            values = (fields["trend"], fields["bollinger_position"], fields["rsi"])
            remember(self._entries, id(summary), (summary, values, dict(reasons), pair), self._size)
        return pair


class FieldForms:
    """``kept.both(snapshot.model_dump(mode="json"))`` made from the snapshot's fields (``None``
    when it must be made from the dump). ``snapshot_cls``: the model, whose ``Any`` fields are
    read as they are; ``ticker_cls``: its tickers' model (float fields, then ``multi_tf``)."""

    def __init__(
        self, snapshot_cls: type[BaseModel], ticker_cls: type[BaseModel], kept: KeptForms
    ) -> None:
        names = tuple(snapshot_cls.model_fields)
        self._cls = snapshot_cls
        self._ticker_cls = ticker_cls
        self._kept = kept
        self._raw = frozenset(
            n for n, f in snapshot_cls.model_fields.items() if "Any" in str(f.annotation)
        )
        self._dumped = {*self._raw, "tickers"}
        # what each field is read from: the partial dump (0), the model (1), the tickers' walk (2)
        self._plan = tuple((n, 2 if n == "tickers" else 1 if n in self._raw else 0) for n in names)
        self._ticker_floats = tuple(n for n in ticker_cls.model_fields if n != "multi_tf")
        require_plain(ticker_cls, frozenset({*self._ticker_floats, "multi_tf"}))
        if _ODD_NAMES & set(ticker_cls.model_fields):
            raise TypeError(f"{ticker_cls.__name__}: a field's name is one the walks treat apart")
        if not all(
            ticker_cls.model_fields[n].annotation == float | None for n in self._ticker_floats
        ):
            raise TypeError(f"{ticker_cls.__name__}: a field is no longer float | None")
        self.summaries = SummaryPairs()

    def pair(self, snapshot: BaseModel) -> Pair | None:
        if type(snapshot) is not self._cls or snapshot.__pydantic_extra__:
            return None
        try:
            typed = snapshot.model_dump(mode="json", exclude=self._dumped)
            return self._walk(typed, snapshot.__dict__)
        except (NotExact, ValueError, KeyError):
            return None  # the dump's walk answers (or raises) as it always did

    def _walk(self, typed: dict[str, Any], fields: dict[str, Any]) -> Pair:
        # ``KeptForms.both`` over the dump, each field taken where the plan says
        reasons = typed.get("unavailable")
        explained = reasons if isinstance(reasons, Mapping) else _NO_REASONS
        kept = self._kept
        done: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for key, source in self._plan:
            item = typed[key] if source == 0 else fields[key]
            if source == 2:
                pair = self._tickers(item)
            elif item is None:
                done[key] = None
                if key not in NOT_SENT and key not in explained:
                    out[key] = None
                continue
            elif key in kept.fields:
                pair = kept.exact(key, item) if source else kept.pair(key, item)
            else:
                pair = exact_pair(item) if source else rounded_and_compact(item)
            done[key] = pair[0]
            if key not in NOT_SENT and not (key == "unavailable" and pair[0] == {}):
                out[key] = pair[1]
        return done, out

    def _tickers(self, tickers: Any) -> Pair:
        if type(tickers) is not dict:
            raise NotExact
        done: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for name, ticker in tickers.items():
            if type(name) is not str or name in _ODD_NAMES or type(ticker) is not self._ticker_cls:
                raise NotExact
            done[name], out[name] = self._ticker(ticker.__dict__)
        return done, out

    def _ticker(self, fields: dict[str, Any]) -> Pair:
        done: dict[str, Any] = {}
        out: dict[str, Any] = {}
        for name in self._ticker_floats:
            value = fields[name]
            if type(value) is float:
                done[name], out[name] = both_float(value)
            elif value is None:
                done[name] = out[name] = None
            else:  # the dump makes an int a float
                raise NotExact
        frames = fields["multi_tf"]
        if type(frames) is not dict:
            raise NotExact
        frames_done: dict[str, Any] = {}
        frames_out: dict[str, Any] = {}
        summary_pair = self.summaries.pair
        for name, summary in frames.items():
            if type(name) is not str or name in _ODD_NAMES or type(summary) is not TimeframeSummary:
                raise NotExact
            frames_done[name], frames_out[name] = summary_pair(summary)
        done["multi_tf"] = frames_done
        out["multi_tf"] = frames_out
        return done, out
