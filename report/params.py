"""What a run was asked: span, tickers, decider, seed, data dir, memory on/off, config digest.

A replay writes ``replay.json`` with these (``runner.replay.command``); the report reads it back.
A live (or simulated) state dir has no such record: its span and tickers are what its journal
shows (said so in ``source``), and the rest is None with the reason in ``unavailable``, shown as
"n/a", never guessed. A replay.json from an older vigil may lack a field: that one is None too.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

import orjson
from pydantic import BaseModel, ConfigDict, Field

from core.clock import RECORDING_YEARS, is_recording_time
from core.regular_file import read_regular_file

REPLAY_FILE: Final = "replay.json"
#: far past any replay.json (a few kB): read whole, one of a gigabyte (a crash's zeros) took it all
_REPLAY_FILE_MAX_BYTES: Final = 64 << 20
NOT_RECORDED_LIVE: Final = "not recorded: a live state dir has no replay.json saying what was asked"
NOT_IN_FILE: Final = "not in replay.json (written by an older vigil)"
# the fields read from replay.json: (report field, replay.json key)
_FIELDS: Final = (
    ("from_ms", "from_ms"),
    ("to_ms", "to_ms"),
    ("tickers", "tickers"),
    ("decider", "decider"),
    ("seed", "seed"),
    ("data_dir", "data_dir"),
    ("memory", "memory"),
    ("config_digest", "config_digest"),
)


class RunParameters(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    source: str  # where these came from: replay.json, or the journal of a live state dir
    from_ms: int | None  # inclusive
    to_ms: int | None  # exclusive for a replay (the end of its --to day); a live run's last line
    tickers: tuple[str, ...] | None
    decider: str | None
    seed: int | None
    data_dir: str | None
    memory: bool | None
    config_digest: str | None
    unavailable: dict[str, str] = Field(default_factory=dict)  # field -> why it is None


def run_parameters(run_dir: Path, decisions: list[dict[str, Any]]) -> RunParameters:
    """From ``replay.json`` when the run folder has one, else from the journal's decisions
    (sorted by time) as far as they tell."""
    path = run_dir / REPLAY_FILE
    if not path.is_file():
        return _from_journal(decisions)
    try:
        document = orjson.loads(read_regular_file(path, max_bytes=_REPLAY_FILE_MAX_BYTES)[1])
    except (OSError, orjson.JSONDecodeError) as exc:
        document, problem = {}, f"{REPLAY_FILE} unreadable: {exc}"
    else:
        problem = "" if isinstance(document, dict) else f"{REPLAY_FILE} is not a JSON object"
    if problem:
        return _none_with(problem, source=REPLAY_FILE)
    values: dict[str, Any] = {}
    unavailable: dict[str, str] = {}
    for field, key in _FIELDS:
        value = document.get(key)
        fits, what = _CHECKS[field]
        if value is None:
            unavailable[field] = NOT_IN_FILE
        elif not fits(value):
            # a hand-edited or foreign file: said, never taken (a string of tickers read as
            # its letters, a time that cannot be dated)
            unavailable[field] = f"{REPLAY_FILE}'s {key} {_shown(value)} is not {what}"
            value = None
        values[field] = tuple(value) if field == "tickers" and value is not None else value
    return RunParameters(source=REPLAY_FILE, unavailable=unavailable, **values)


def _is_tickers(value: object) -> bool:
    return type(value) is list and all(type(t) is str for t in value)


_CHECKS: Final[dict[str, tuple[Callable[[object], bool], str]]] = {
    "from_ms": (is_recording_time, f"a time within {RECORDING_YEARS} in milliseconds"),
    "to_ms": (is_recording_time, f"a time within {RECORDING_YEARS} in milliseconds"),
    "tickers": (_is_tickers, "a list of tickers"),
    "decider": (lambda v: type(v) is str, "a decider's name"),
    "seed": (lambda v: type(v) is int, "a whole number"),
    "data_dir": (lambda v: type(v) is str, "a path"),
    "memory": (lambda v: type(v) is bool, "true or false"),
    "config_digest": (lambda v: type(v) is str, "a digest"),
}


def _shown(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _from_journal(decisions: list[dict[str, Any]]) -> RunParameters:
    unavailable = {field: NOT_RECORDED_LIVE for field in ("decider", "seed", "data_dir", "memory")}
    unavailable["config_digest"] = NOT_RECORDED_LIVE
    tickers: set[str] = set()
    for record in decisions:
        tickers.update(((record.get("snapshot") or {}).get("tickers") or {}).keys())
    if not decisions:
        unavailable["from_ms"] = unavailable["to_ms"] = "no decision in the journal"
    if not tickers:
        unavailable["tickers"] = "no snapshot in the journal names a ticker"
    return RunParameters(
        source="journal (live state dir: span = first and last decision, tickers = those seen)",
        from_ms=int(decisions[0]["at_ms"]) if decisions else None,
        to_ms=int(decisions[-1]["at_ms"]) if decisions else None,
        tickers=tuple(sorted(tickers)) or None,
        decider=None,
        seed=None,
        data_dir=None,
        memory=None,
        config_digest=None,
        unavailable=unavailable,
    )


def _none_with(reason: str, *, source: str) -> RunParameters:
    fields = {field: None for field, _ in _FIELDS}
    return RunParameters(source=source, unavailable=dict.fromkeys(fields, reason), **fields)


__all__ = ["NOT_IN_FILE", "NOT_RECORDED_LIVE", "REPLAY_FILE", "RunParameters", "run_parameters"]
