"""``RunnerState``: what ``runner_state.json`` holds, and how its text is parsed and checked.

Two kinds of fields live in the file:

- editable (``EDITABLE_FIELDS``): a person may change them while the daemon runs; the daemon merges
  a valid edit into its live state instead of overwriting it;
- daemon-owned (everything else): the daemon's bookkeeping; a person's change to them is ignored
  (and reported) because the daemon's in-memory values are the truth.

The state is frozen all the way down (mappings are read-only views) so the "last good state" a
caller holds can never be changed behind the store's back.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PlainSerializer,
    ValidationError,
)

from core.jsonread import UnreadableJsonError, loads_json
from state.json_checks import lone_surrogate
from state.line_text import terminal_safe_json
from state.memory_clip import AGENT_MEMORY_MAX_CHARS
from state.trading import TradingState

#: the version this code writes; files with a higher version are refused, lower ones migrated
SCHEMA_VERSION: Final = 1

#: fields a person may edit in the file. EXTENSION POINT: a later issue that adds a person-editable
#: field adds it to the model and here (and the store merges it like the others).
EDITABLE_FIELDS: Final = ("agent_memory", "notes", "trading")

#: fields only the daemon changes, through ``RunnerStateStore.update`` / ``replace``.
#: EXTENSION POINT: a later issue adds its daemon-owned field to the model and here, or keeps small
#: things under ``extra`` (JSON values, namespaced by the issue: ``extra["learner"] = {...}``).
DAEMON_FIELDS: Final = ("entry_prices", "entry_times_ms", "trailing_highs", "extra")


def _frozen_mapping(value: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(value))


def _frozen_json(value: Mapping[str, Any]) -> Mapping[str, Any]:
    frozen = _freeze_json_value(value, "extra")
    assert isinstance(frozen, Mapping)
    return frozen


#: how deep ``extra`` may nest: a feature's data is a few levels. A few hundred (under json's own
#: limit of about a thousand) took this check past the stack, and its RecursionError escaped
#: every reader of the file: the store's poll and each save, the start, ``vigil trading``
EXTRA_MAX_DEPTH: Final = 64


def _freeze_json_value(value: Any, where: str, depth: int = 0) -> Any:
    """Check that ``value`` is plain JSON data and return a read-only copy of it."""
    if depth > EXTRA_MAX_DEPTH:
        raise ValueError(f"{where} is nested deeper than {EXTRA_MAX_DEPTH} levels")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"{where} is {value!r}; only finite numbers can be stored")
        return value
    if isinstance(value, Mapping):
        frozen: dict[str, Any] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                raise ValueError(f"{where} has a non-string key {key!r}")
            frozen[key] = _freeze_json_value(item, f"{where}.{key}", depth + 1)
        return MappingProxyType(frozen)
    if isinstance(value, (list, tuple)):
        return tuple(
            _freeze_json_value(item, f"{where}[{i}]", depth + 1) for i, item in enumerate(value)
        )
    raise ValueError(f"{where} holds a {type(value).__name__}; only JSON values can be stored")


def _thaw_json_value(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {key: _thaw_json_value(item) for key, item in value.items()}
    if isinstance(value, tuple):
        return [_thaw_json_value(item) for item in value]
    return value


PositivePrice = Annotated[float, Field(gt=0, allow_inf_nan=False)]
EpochMs = Annotated[int, Field(ge=0)]

PriceByTicker = Annotated[
    Mapping[str, PositivePrice],
    AfterValidator(_frozen_mapping),
    PlainSerializer(dict, return_type=dict[str, float]),
]
EpochMsByTicker = Annotated[
    Mapping[str, EpochMs],
    AfterValidator(_frozen_mapping),
    PlainSerializer(dict, return_type=dict[str, int]),
]
JsonObject = Annotated[
    Mapping[str, Any],
    AfterValidator(_frozen_json),
    PlainSerializer(_thaw_json_value, return_type=dict[str, Any]),
]


class RunnerState(BaseModel):
    """The daemon's persistent state. Strict: a person's ``"1"`` for a number is an error."""

    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)

    schema_version: int = Field(SCHEMA_VERSION, ge=SCHEMA_VERSION, le=SCHEMA_VERSION)
    # --- editable by a person while the daemon runs (EDITABLE_FIELDS) ---
    agent_memory: str = Field("", max_length=AGENT_MEMORY_MAX_CHARS)
    notes: str = ""
    # ACTIVE / HALTED with a reason: a person resumes trading here (or with `vigil trading resume`)
    trading: TradingState = Field(default_factory=TradingState)
    # --- daemon-owned (DAEMON_FIELDS); keyed by unified ticker, e.g. "BTC/USDT" ---
    entry_prices: PriceByTicker = Field(default_factory=dict)
    entry_times_ms: EpochMsByTicker = Field(default_factory=dict)
    trailing_highs: PriceByTicker = Field(default_factory=dict)
    updated_at_ms: EpochMs = 0
    # EXTENSION POINT for later issues: JSON data under a key named after the owning feature
    extra: JsonObject = Field(default_factory=dict)


class InvalidStateFileError(ValueError):
    """The file's text is not a valid ``RunnerState``; ``problem`` says why, for a person."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem


class NewerSchemaError(InvalidStateFileError):
    """The file was written by a newer vigil than this one; it must not be rewritten."""

    def __init__(self, found_version: int) -> None:
        super().__init__(
            f"schema_version {found_version} is newer than this vigil understands "
            f"(it reads versions up to {SCHEMA_VERSION})"
        )
        self.found_version = found_version


#: from_version -> function turning a raw dict of that version into one of from_version + 1.
#: Version 0 is a file from before ``schema_version`` existed: same fields, so the step is identity.
Migration = Callable[[dict[str, Any]], dict[str, Any]]
MIGRATIONS: Final[Mapping[int, Migration]] = MappingProxyType({0: lambda raw: raw})


def migrate_raw_state(
    raw: dict[str, Any],
    *,
    target_version: int = SCHEMA_VERSION,
    migrations: Mapping[int, Migration] = MIGRATIONS,
) -> dict[str, Any]:
    """Bring a parsed file of any older version up to ``target_version``, one step at a time.

    A missing ``schema_version`` means version 0. Raises ``NewerSchemaError`` for a version above
    ``target_version`` and ``InvalidStateFileError`` for one no migration path starts from.
    """
    version = raw.get("schema_version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise InvalidStateFileError(f"schema_version must be an integer, found {version!r}")
    if version > target_version:
        raise NewerSchemaError(version)
    migrated = dict(raw)
    while version < target_version:
        step = migrations.get(version)
        if step is None:
            raise InvalidStateFileError(
                f"schema_version {version} is not a version vigil ever wrote "
                f"(known: {sorted(migrations)} and {target_version})"
            )
        migrated = step(dict(migrated))
        version += 1
        migrated["schema_version"] = version
    return migrated


def parse_state_bytes(data: bytes) -> tuple[RunnerState, int]:
    """Parse the file's bytes; returns the state (migrated) and the version the file had.

    Raises ``InvalidStateFileError`` (or its subclass ``NewerSchemaError``) with a message that
    names the line/column of a JSON error or the field of a validation error.
    """
    raw = _parse_json_object(data)
    found_version = raw.get("schema_version", 0)
    migrated = migrate_raw_state(raw)
    try:
        return RunnerState.model_validate(migrated), found_version
    except ValidationError as exc:
        raise InvalidStateFileError(describe_validation_error(exc)) from None


def render_state(state: RunnerState) -> bytes:
    """The file's text: indented JSON in field order (editable fields first), UTF-8, final newline;
    DEL and C1 characters escaped, as in the journals: a person ``cat``s this file, and a model's
    memory note holding U+009B reached it raw (a terminal reads it as ESC [)."""
    text = json.dumps(state.model_dump(mode="json"), indent=2, ensure_ascii=False, allow_nan=False)
    return (terminal_safe_json(text) + "\n").encode("utf-8")


def describe_validation_error(exc: ValidationError) -> str:
    problems = []
    for err in exc.errors():
        field = ".".join(str(part) for part in err["loc"]) or "<top level>"
        if err["type"] == "extra_forbidden":
            known = ", ".join(RunnerState.model_fields)
            problems.append(f"unknown key {field!r} (allowed keys: {known})")
        elif err["type"] == "string_too_long":
            length = len(err["input"]) if isinstance(err["input"], str) else "?"
            problems.append(f"field {field!r} is {length} characters: {err['msg']}")
        else:
            shown = repr(err.get("input"))
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            problems.append(f"field {field!r}: {err['msg']} (found {shown})")
    return "; ".join(problems)


def _parse_json_object(data: bytes) -> dict[str, Any]:
    try:
        text = data.decode("utf-8-sig")  # tolerate the BOM some editors add
    except UnicodeDecodeError as exc:
        raise InvalidStateFileError(f"not UTF-8 text (bad byte at offset {exc.start})") from None
    if not text.strip():
        raise InvalidStateFileError("the file is empty")
    try:  # an InvalidStateFileError from the hooks passes through, already saying what is wrong
        raw = loads_json(text, object_pairs_hook=_no_duplicate_keys, parse_constant=_no_constants)
    except UnreadableJsonError as exc:
        # json's own limits too (a number too long, nesting too deep): uncaught, the edit was
        # neither rejected nor kept aside, and the next save overwrote it
        raise InvalidStateFileError(str(exc)) from None
    if not isinstance(raw, dict):
        raise InvalidStateFileError(f"expected one JSON object, found a {type(raw).__name__}")
    half = lone_surrogate(text, raw)
    if half is not None:
        raise InvalidStateFileError(
            f"a \\u escape gives {half}, half of a surrogate pair, which UTF-8 cannot store"
        )
    return raw


def _no_duplicate_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    for key, value in pairs:
        if key in result:
            raise InvalidStateFileError(f"key {key!r} appears twice in one object")
        result[key] = value
    return result


def _no_constants(name: str) -> Any:
    raise InvalidStateFileError(f"{name} is not a number JSON allows")
