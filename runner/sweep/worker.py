"""One run of a sweep, as a Dask task: a normal replay folder, or a failure with its reason.

The task is self-contained (it imports, builds and runs everything in the worker process), returns
a small JSON-able record and never raises: a run that fails is recorded and the sweep goes on.
A run's folder holds ``failed.json`` instead of a finished ``replay.json`` when it failed.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
import traceback
from pathlib import Path
from typing import Any

from core.jsonread import read_json_object
from report.experiment import report_figures
from runner.config import Settings
from runner.sweep.grid import RunSpec
from state.atomic import atomic_write_bytes

FAILED_FILE = "failed.json"


def is_done(run_dir: Path, spec: RunSpec | None = None) -> bool:
    """A finished replay, every loop up throughout, whose report was written and reads as one
    (``report_figures``): nothing to redo. A garbled report.json is redone, not averaged in.
    With ``spec``, the replay must also be the run it asks (``asks``): a folder copied or moved
    under another run's key was skipped and reported as that run."""
    # a run whose files cannot be read is not done: it is redone, not a crash of the report
    facts = read_json_object(run_dir / "replay.json")
    report = read_json_object(run_dir / "report.json")
    return (
        facts is not None
        and facts.get("finished") is True  # "false" or 1 is a hand edit, not a finished run
        and not facts.get("loop_failures")
        and (spec is None or asks(facts, spec))
        and report_figures(report) is not None
    )


def asks(facts: dict[str, Any], spec: RunSpec) -> bool:
    """Whether a replay.json is of ``spec``'s span, tickers, decider, memory and seed. Not its
    data dir: a worker resolves its own default (a worker image's /app/data), the same data."""
    options = spec.options(Path())
    asked = [options.start_ms, options.end_ms, list(spec.tickers), spec.decider, spec.memory]
    names = ("from_ms", "to_ms", "tickers", "decider", "memory", "seed")
    # as JSON, so a hand-edited 1 is not the memory true and 7.0 not the seed 7
    return json.dumps([facts.get(name) for name in names]) == json.dumps([*asked, spec.seed])


def run_one(spec_json: dict[str, Any], settings: Settings, runs_dir: str) -> dict[str, Any]:
    """Replay ``spec`` into ``runs_dir/<key>`` (cleared first if an earlier attempt left parts)."""
    spec = RunSpec.model_validate(spec_json)
    run_dir = Path(runs_dir) / spec.key
    if is_done(run_dir, spec):
        return {"key": spec.key, "status": "done", "skipped": True}
    # a killed or failed attempt's folder is cleared: replay refuses a folder holding a run
    if run_dir.exists() or run_dir.is_symlink():
        try:
            shutil.rmtree(run_dir)
        except OSError as exc:  # a file or a link in its place is someone's: kept, not followed
            reason = f"cannot clear {run_dir} for the run: {type(exc).__name__}: {exc}"
            return {"key": spec.key, "status": "failed", "reason": reason}
    started = time.monotonic()
    try:
        outcome = _replay(spec, settings, Path(runs_dir))
    except BaseException as exc:
        if isinstance(exc, KeyboardInterrupt | SystemExit):
            raise
        reason = f"{type(exc).__name__}: {exc}"
        document = {"reason": reason, "traceback": traceback.format_exc(limit=8)}
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            # a fresh name renamed into place: by name, a link planted there was written through
            data = (json.dumps(document, indent=2) + "\n").encode()
            atomic_write_bytes(run_dir / FAILED_FILE, data, durable=False)
        except OSError as unwritten:  # a full disk: raised, the sweep said 'worker lost'
            reason += f" ({FAILED_FILE} not written: {unwritten})"
        return {"key": spec.key, "status": "failed", "reason": reason}
    reason = outcome["failure"]
    return {
        "key": spec.key,
        "status": "failed" if reason else "done",
        "skipped": False,
        "wall_secs": round(time.monotonic() - started, 3),
        **({"reason": reason} if reason else {}),
    }


def _replay(spec: RunSpec, settings: Settings, runs_dir: Path) -> dict[str, Any]:
    from report.html import write_report
    from runner.replay.build import build_replay, replay_settings
    from runner.replay.command import run_replay, write_replay_json

    options = spec.options(runs_dir)

    async def run() -> dict[str, Any]:
        replay = build_replay(replay_settings(settings, options), options)
        outcome = await run_replay(replay)
        write_replay_json(replay, outcome)
        return {"failure": outcome.failure}

    result = asyncio.run(run())
    write_report(options.out_dir)
    return result


__all__ = ["FAILED_FILE", "asks", "is_done", "run_one"]
