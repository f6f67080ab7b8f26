"""``models/online_learner.json``: the learner's posteriors, trade window and regime counts on disk.

The file is JSON with a ``schema_version``. Reading never changes the file: a file this vigil
cannot trust (not JSON, invalid, from a newer vigil) raises ``InvalidLearnerFileError`` and the
caller refuses to start, leaving it for a person to inspect. Writing is atomic (tmp + fsync +
rename), so a crash leaves the old model or the new one, never a mix.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from core.jsonread import UnreadableJsonError, loads_json
from core.regular_file import read_bytes_or_none
from state.atomic import atomic_write_bytes

SCHEMA_VERSION = 1
#: a model is kilobytes (50 trades, a posterior per signal and regime); a damaged file of
#: gigabytes was read whole at start
LEARNER_FILE_MAX_BYTES = 64 * 1024 * 1024

#: the most signals (arms) and regimes a model holds: a run learns one arm per signal name
#: (``agent.signal_names``, ~20) and a regime per volatility level or custom label; thousands,
#: each drawn and shown in every decision's snapshot, are a damaged or hand-made file
MAX_SIGNALS = 256
MAX_REGIMES = 256

#: above about 9e307, ``random.betavariate`` never returns (``2 * alpha`` overflows and its
#: rejection test compares NaN); the learner's own updates stay near ``1 / (1 - discount)``
MAX_EVIDENCE = 1e12
Evidence = Annotated[float, Field(gt=0, le=MAX_EVIDENCE, allow_inf_nan=False)]
Finite = Annotated[float, Field(allow_inf_nan=False)]


class InvalidLearnerFileError(ValueError):
    """The file's bytes are not a learner model this vigil can read; the message says why."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class PosteriorRecord(_Frozen):
    alpha: Evidence
    beta: Evidence
    trades: int = Field(ge=0)


class TradeRecord(_Frozen):
    """One closed trade as the learner saw it; also the compact dict ``recent_trades`` returns."""

    ticker: str
    at_ms: int
    pnl_pct: Finite  # percent, as PositionExit reports it (+5 % is 5.0)
    holding_secs: Finite
    regime: str | None
    signals: dict[str, Finite]
    #: the exit's stable id (its outbox key): an exit delivered again is recognised, not relearned
    trade_id: str | None = None


Posteriors = Annotated[dict[str, PosteriorRecord], Field(max_length=MAX_SIGNALS)]


class LearnerFile(_Frozen):
    schema_version: int = SCHEMA_VERSION
    global_posteriors: Posteriors = Field(default_factory=dict)
    regime_posteriors: dict[str, Posteriors] = Field(default_factory=dict, max_length=MAX_REGIMES)
    regime_counts: dict[str, Annotated[int, Field(ge=0)]] = Field(
        default_factory=dict, max_length=MAX_REGIMES
    )
    recent_trades: list[TradeRecord] = Field(default_factory=list)


def parse_learner_bytes(data: bytes) -> LearnerFile:
    """Parse and validate; raises ``InvalidLearnerFileError`` naming the problem."""
    try:  # an InvalidLearnerFileError from parse_constant passes through
        raw = loads_json(data, parse_constant=_reject_constant)
    except UnreadableJsonError as exc:
        raise InvalidLearnerFileError(str(exc)) from None
    if not isinstance(raw, dict):
        raise InvalidLearnerFileError(f"expected one JSON object, found {type(raw).__name__}")
    version = raw.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise InvalidLearnerFileError(f"schema_version must be an integer >= 1, found {version!r}")
    if version > SCHEMA_VERSION:
        raise InvalidLearnerFileError(
            f"schema_version {version} is newer than this vigil reads (up to {SCHEMA_VERSION})"
        )
    try:
        return LearnerFile.model_validate(raw)
    except ValidationError as exc:
        raise InvalidLearnerFileError(_describe(exc)) from None


def read_learner_file(path: Path) -> LearnerFile | None:
    """The model at ``path``, or ``None`` when there is no file yet (a fresh learner). Raises
    ``OSError`` for anything but a regular file (a FIFO blocked the start for good) and for a
    file over ``LEARNER_FILE_MAX_BYTES``, which is not read."""
    data = read_bytes_or_none(path, max_bytes=LEARNER_FILE_MAX_BYTES)
    return None if data is None else parse_learner_bytes(data)


def render_learner_file(model: LearnerFile) -> bytes:
    text = json.dumps(model.model_dump(mode="json"), indent=2, sort_keys=True, allow_nan=False)
    return (text + "\n").encode("utf-8")


def write_learner_file(path: Path, model: LearnerFile) -> None:
    """Atomically replace ``path`` (its directory is created if missing). Raises ``OSError``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, render_learner_file(model))


def _reject_constant(name: str) -> Any:
    raise InvalidLearnerFileError(f"{name} is not a number this file may hold")


def _describe(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        where = ".".join(str(part) for part in err["loc"]) or "<top level>"
        shown = repr(err.get("input"))
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        problems.append(f"{where}: {err['msg']} (found {shown})")
    return "; ".join(problems)
