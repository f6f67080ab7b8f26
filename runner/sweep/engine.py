"""Running a sweep on Dask distributed and writing its experiment report.

By default an in-process ``LocalCluster`` (one single-threaded worker process per core: a replay is
one event loop); ``--scheduler tcp://host:8786`` submits the same tasks to a running Dask cluster
(``dask scheduler`` + ``dask worker tcp://host:8786 --nthreads 1`` on each machine, the vigil Docker
image as the worker image). With a remote cluster the output folder must be on a filesystem every
worker sees at the same path. Dask does the queueing, placement and retries of lost workers; vigil
adds only the resume rule: a run whose folder holds a finished replay and its report is skipped.

``<out>/sweep.json`` is rewritten after every run (what was asked, each run's key, status and
reason); ``<out>/runs/<key>/`` are normal replay folders; ``<out>/experiment.json`` and
``experiment.html`` are the experiment report (``report.experiment``).
"""

from __future__ import annotations

import importlib
import json
import logging
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from core.errors import RefuseToStartError
from core.jsonread import read_json_object
from market.recorded import default_data_dir
from report.experiment import RunEntry, write_experiment
from runner.config import Settings
from runner.sweep.grid import Grid, RunSpec, check_runs, expand, load_grid, variant_settings
from runner.sweep.scheduler import check_scheduler
from runner.sweep.worker import FAILED_FILE, is_done, run_one
from state.atomic import atomic_write_bytes


def run_sweep(
    grid_path: Path,
    out_dir: Path,
    base_overrides: Mapping[str, Any],
    *,
    scheduler: str | None = None,
    workers: int | None = None,
    stream: TextIO,
) -> int:
    """Run every run of the grid not done yet; 0 when all are done, 1 when some failed."""
    grid = load_grid(grid_path)
    variants = variant_settings(base_overrides, grid)
    specs = expand(grid, variants, default_data_dir())
    runs_dir = out_dir / "runs"
    check_runs(specs, variants, runs_dir)
    if scheduler is not None:
        check_scheduler(scheduler)
    _refuse_folders_in_place(out_dir)
    try:
        runs_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise RefuseToStartError(f"--out {out_dir}: cannot make {runs_dir} ({exc})") from None
    records: dict[str, dict[str, Any]] = {}
    todo = []
    for spec in specs:
        if is_done(runs_dir / spec.key, spec):
            records[spec.key] = {"status": "done", "skipped": True}
        else:
            todo.append(spec)
    where = scheduler or f"a local Dask cluster of {workers or os.cpu_count() or 1} worker(s)"
    print(
        f"sweep: {len(specs)} runs, {len(specs) - len(todo)} already done, "
        f"{len(todo)} to run on {where}",
        file=stream,
        flush=True,
    )
    try:
        _write_status(out_dir, grid, specs, records)
    except OSError as exc:  # a full disk: every run would fail to write its folder as well
        status = out_dir / "sweep.json"
        raise RefuseToStartError(f"--out {out_dir}: cannot write {status} ({exc})") from None
    if todo:
        _run_on_dask(
            todo, variants, runs_dir, records, scheduler, workers, stream, out_dir, grid, specs
        )
        unwritten = _status_unwritten(out_dir, grid, specs, records)
    else:
        unwritten = None
    entries = [_entry(spec, runs_dir, records.get(spec.key, {})) for spec in specs]
    failed = [e for e in entries if e.status != "done"]
    try:
        report_path = write_experiment(out_dir, entries)
    except OSError as exc:  # a full disk at the end: the runs are kept, a rerun writes it
        print(
            f"sweep: {len(specs) - len(failed)} done, {len(failed)} failed; cannot write the "
            f"experiment report in {out_dir} ({exc}); run the sweep again to write it",
            file=stream,
        )
        return 1
    print(
        f"sweep: {len(specs) - len(failed)} done, {len(failed)} failed; report: {report_path}",
        file=stream,
    )
    if unwritten is not None:
        print(f"sweep: {unwritten}; run the sweep again to write it", file=stream)
        return 1
    return 0 if not failed else 1


#: what a sweep rewrites in --out: a folder in one's place failed its rename with a traceback,
#: sweep.json's before the first run and the report's after the last
_OWN_FILES = ("sweep.json", "experiment.json", "experiment.html")


def _refuse_folders_in_place(out_dir: Path) -> None:
    for name in _OWN_FILES:
        path = out_dir / name
        if path.is_dir() and not path.is_symlink():  # a link is replaced, not followed
            raise RefuseToStartError(f"--out {out_dir}: {path} is a folder; move it away")


def _run_on_dask(
    todo: list[RunSpec],
    variants: Mapping[str, Settings],
    runs_dir: Path,
    records: dict[str, dict[str, Any]],
    scheduler: str | None,
    workers: int | None,
    stream: TextIO,
    out_dir: Path,
    grid: Grid,
    specs: list[RunSpec],
) -> None:
    as_completed = _distributed().as_completed
    said = False
    with _client(scheduler, workers) as client:
        futures = {
            client.submit(
                run_one,
                spec.model_dump(mode="json"),
                variants[spec.override],
                str(runs_dir.resolve()),
                key=f"vigil-run-{spec.key}",
                pure=False,
            ): spec
            for spec in todo
        }
        for count, future in enumerate(as_completed(futures), start=1):
            spec = futures[future]
            try:
                record = future.result()
            except Exception as exc:  # the worker itself died (run_one never raises)
                record = {"key": spec.key, "status": "failed", "reason": f"worker lost: {exc}"}
            records[spec.key] = record
            unwritten = _status_unwritten(out_dir, grid, specs, records)
            if unwritten is not None and not said:  # once: a full disk fails every rewrite
                said = True
                print(f"sweep: {unwritten}; the runs go on, kept in their folders", file=stream)
            print(
                f"[{count}/{len(todo)}] {_describe(spec)}: {_outcome(record)}",
                file=stream,
                flush=True,
            )


@contextmanager
def _client(scheduler: str | None, workers: int | None) -> Iterator[Any]:
    distributed = _distributed()
    # Dask logs every worker start and stop at INFO: the sweep's own lines say what matters
    logging.getLogger("distributed").setLevel(logging.WARNING)
    Client, LocalCluster = distributed.Client, distributed.LocalCluster
    if scheduler is not None:
        with Client(scheduler) as client:
            yield client
        return
    with (
        LocalCluster(
            n_workers=workers or os.cpu_count() or 1,
            threads_per_worker=1,  # a replay is one event loop: one task per process
            processes=True,
            dashboard_address=None,
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


def _distributed() -> Any:
    """``dask.distributed``, imported when a sweep runs (it is heavy and partly untyped)."""
    return importlib.import_module("dask.distributed")


def _entry(spec: RunSpec, runs_dir: Path, record: Mapping[str, Any]) -> RunEntry:
    run_dir = runs_dir / spec.key
    status = "done" if is_done(run_dir, spec) else "failed" if record else "not run"
    reason = record.get("reason")
    if status != "done" and reason is None and (run_dir / FAILED_FILE).is_file():
        recorded = (read_json_object(run_dir / FAILED_FILE) or {}).get("reason")
        reason = recorded if isinstance(recorded, str) else None
    if status == "failed" and reason is None:  # the worker said done, or left no failed.json
        reason = (
            f"{run_dir} holds no finished replay with its report: removed or changed after its "
            "run, or --out is not on storage the workers share"
        )
    return RunEntry(
        key=spec.key,
        run_dir=str(run_dir),
        period=f"{spec.period[0]} .. {spec.period[1]}",
        tickers=",".join(spec.tickers),
        decider=spec.decider,
        memory=spec.memory,
        seed=spec.seed,
        override=spec.override,
        status=status,
        reason=reason,
    )


def _status_unwritten(
    out_dir: Path, grid: Grid, specs: list[RunSpec], records: Mapping[str, Mapping[str, Any]]
) -> str | None:
    """``_write_status``; None when written, else why not. Its OSError (a full disk) mid-sweep
    was a traceback that stopped the cluster with runs still to go and no report written."""
    try:
        _write_status(out_dir, grid, specs, records)
    except OSError as exc:
        return f"cannot write {out_dir / 'sweep.json'} ({exc})"
    return None


def _write_status(
    out_dir: Path, grid: Grid, specs: list[RunSpec], records: Mapping[str, Mapping[str, Any]]
) -> None:
    document = {
        "grid": grid.model_dump(mode="json"),
        "runs": [
            {
                **spec.model_dump(mode="json"),
                **{k: v for k, v in records.get(spec.key, {}).items() if k != "key"},
            }
            for spec in specs
        ],
    }
    atomic_write_bytes(out_dir / "sweep.json", (json.dumps(document, indent=2) + "\n").encode())


def _describe(spec: RunSpec) -> str:
    first, last = spec.period
    memory = "on" if spec.memory else "off"
    return (
        f"{spec.key} {first}..{last} {','.join(spec.tickers)} {spec.decider} memory={memory} "
        f"seed={spec.seed} {spec.override}"
    )


def _outcome(record: Mapping[str, Any]) -> str:
    if record.get("status") == "done":
        return f"done in {record.get('wall_secs', 0):.1f} s"
    return f"FAILED: {record.get('reason')}"


__all__ = ["run_sweep"]
