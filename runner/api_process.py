"""The operator's API in a process of its own (``[api] isolation = "process"``, the default).

Why: the daemon's event loop is what trades. On it, every request a dashboard makes is work a
decision waits behind (measured: a decision's median latency +91 % under 50 clients, with the
API's admission control on). In its own process, at a lower priority (``process_nice``), the API
parses HTTP, reads the journal and renders pages on the other core; the daemon's loop sees only
a private loopback API asked at most once per live route per ``live_cache_ms`` (``api.proxy``).

The daemon side (``run_api_process``, the body of the supervised ``api`` loop) serves that
private API, starts ``python -m runner.api_process`` with its spec on stdin, and raises when the
process ends so the supervisor restarts both with backoff. The process side (``main``) exits when
its stdin closes: a daemon killed with SIGKILL leaves no orphan API answering for it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import sys
import threading
from pathlib import Path
from typing import NoReturn

from pydantic import BaseModel, ConfigDict

from api.app import ApiContext, create_app
from api.config import ApiConfig
from api.files import StateDirFiles
from api.proxy import Upstream
from api.server import ApiServer
from api.stream import stream_routes
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError, RetryableError
from core.regular_file import refuse_unless_regular
from runner.logging_setup import LogConfig, configure_logging
from runner.own_module import own_module
from runner.stop_signals import on_stop_signals
from state.line_text import as_one_line

log = logging.getLogger(__name__)

STOP_GRACE_SECS = 5.0


class ApiProcessSpec(BaseModel):
    """What the API process needs, sent on its stdin (a pipe: the token stays out of ``ps``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    state_dir: Path
    logs_dir: Path
    api: ApiConfig
    token: str
    upstream_url: str
    prices_as_of: str | None = None
    log_level: str = "INFO"
    log: LogConfig = LogConfig()


#: the API process's exit code when it could not listen (its log line says why): it refused to start
EXIT_CANNOT_LISTEN = EXIT_REFUSE_TO_START
#: the API process's exit code when its log file is refused (sysexits EX_CANTCREAT): a symlink,
#: FIFO or folder at ``logs/api.log`` is a person's to move, and no later try would find it gone
EXIT_LOG_REFUSED = 73
API_LOG_NAME = "api.log"


class ApiCannotListenError(RetryableError):
    """The API process could not bind its address (its log line says why); the supervisor tries
    again after its backoff, saying so in one line."""


# --- the daemon's side -------------------------------------------------------------------------


async def run_api_process(upstream: ApiServer, spec: ApiProcessSpec) -> None:
    """Serve the private API, run the API process beside it (``spec`` with the private API's
    URL, known once it listens); raise when either stops. A refused ``api.log`` turns the API
    off until the daemon stops (``_api_off``): started again, it was refused again each time."""
    api_log = spec.logs_dir / API_LOG_NAME
    try:  # its refusal said here, in vigil.log (the API process's own log is what is refused)
        refuse_unless_regular(api_log, "the API's log file ")
    except RefuseToStartError as exc:
        await _api_off(str(exc))
    if await _serve_beside(upstream, spec) == EXIT_LOG_REFUSED:  # planted since the check
        await _api_off(f"the API process refused its log file {api_log} (it said why on stderr)")


async def _api_off(why: str) -> NoReturn:
    """Say ``why`` once and wait to be cancelled: a loop that raised was started again after its
    backoff, and the API process printed its traceback and was refused again, for good."""
    log.error("%s; the API is off until vigil starts again (trading goes on)", why)
    await asyncio.get_running_loop().create_future()  # never set: until the daemon stops
    raise AssertionError("unreachable: only cancelled")  # pragma: no cover


async def _serve_beside(upstream: ApiServer, spec: ApiProcessSpec) -> int:
    """Serve the private API and run the API process; its exit code when it refused its log
    file, else raise when either stops."""
    serving = asyncio.create_task(upstream.run(), name="api upstream")
    try:
        await _started(upstream, serving)
        if upstream.url is None:
            raise RuntimeError("the daemon's private API has no URL")
        proc = await asyncio.create_subprocess_exec(
            *own_module("runner.api_process"), stdin=asyncio.subprocess.PIPE
        )
        try:
            await _send_spec(proc, spec.model_copy(update={"upstream_url": upstream.url}))
            exited = asyncio.create_task(proc.wait(), name="api process")
            await asyncio.wait({serving, exited}, return_when=asyncio.FIRST_COMPLETED)
            if serving.done():
                serving.result()  # raises what stopped it
            if proc.returncode == EXIT_LOG_REFUSED:
                return EXIT_LOG_REFUSED
            if proc.returncode == EXIT_CANNOT_LISTEN:
                where = f"{spec.api.host}:{spec.api.port}"
                raise ApiCannotListenError(f"the API process cannot listen on {where} (api.log)")
            raise RuntimeError(f"the API process (pid {proc.pid}) exited with {proc.returncode}")
        finally:
            await _stop(proc)
    finally:
        serving.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await serving


async def _started(server: ApiServer, serving: asyncio.Task[None]) -> None:
    waiting = asyncio.create_task(server.started.wait())
    try:
        await asyncio.wait({serving, waiting}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiting.cancel()
    if serving.done():
        serving.result()
        raise RuntimeError("the daemon's private API stopped during startup")


async def _send_spec(proc: asyncio.subprocess.Process, spec: ApiProcessSpec) -> None:
    if proc.stdin is None:
        raise RuntimeError("the API process has no stdin")
    proc.stdin.write(spec.model_dump_json().encode() + b"\n")
    await proc.stdin.drain()  # stdin stays open: its end is the process's signal to go


async def _stop(proc: asyncio.subprocess.Process) -> None:
    if proc.returncode is not None:
        return
    if proc.stdin is not None:
        proc.stdin.close()  # the process sees EOF and stops its server in order
    # and SIGTERM, which does the same once it serves: one still starting (imports take seconds
    # for a niced process on a loaded machine) ends at once instead of finishing its start-up
    with contextlib.suppress(ProcessLookupError):
        proc.terminate()
    try:
        await asyncio.wait_for(proc.wait(), STOP_GRACE_SECS)
    except TimeoutError:
        log.warning(
            "the API process (pid %s) did not stop in %s s: killed", proc.pid, STOP_GRACE_SECS
        )
        proc.kill()
        await proc.wait()


# --- the API process's side ---------------------------------------------------------------------


def build_process_server(spec: ApiProcessSpec) -> tuple[ApiServer, Upstream]:
    upstream = Upstream(spec.upstream_url, spec.token)
    ctx = ApiContext(
        files=StateDirFiles(spec.state_dir),
        config=spec.api,
        token=spec.token,
        extensions=[stream_routes(None)],  # the routes for the docs; the proxy answers them
        prices_as_of=spec.prices_as_of,
        upstream=upstream,
    )
    return ApiServer(create_app(ctx), spec.api.host, spec.api.port, spec.state_dir), upstream


async def _serve(spec: ApiProcessSpec) -> int:
    server, upstream = build_process_server(spec)
    task = asyncio.create_task(server.run(), name="api")
    loop = asyncio.get_running_loop()
    on_stop_signals(loop, lambda _name: task.cancel())
    _cancel_on_stdin_eof(loop, task)
    try:
        await task
    except asyncio.CancelledError:
        return 0
    except (OSError, UnicodeError) as exc:
        if server.started.is_set():
            log.exception("the API process stops (the daemon starts another after its backoff)")
            return 1
        # a taken port, another host's address, a name that does not resolve: the person's to
        # fix, said in one line (each try after the backoff was a traceback in api.log)
        log.error(
            "the API cannot listen on %s:%s: %s (the daemon tries again after its backoff; "
            "free the port or set api.host / api.port)",
            spec.api.host,
            spec.api.port,
            exc,
        )
        return EXIT_CANNOT_LISTEN
    except Exception:
        log.exception("the API process stops (the daemon starts another after its backoff)")
        return 1
    finally:
        await upstream.close()
    return 1


def _cancel_on_stdin_eof(loop: asyncio.AbstractEventLoop, task: asyncio.Task[None]) -> None:
    """The daemon holds our stdin open; EOF means it stopped us, or died.

    Read from the file descriptor, not ``sys.stdin.buffer``: a thread blocked in a buffered read
    holds the buffer's lock, and an interpreter exiting around it (after SIGTERM or SIGINT, with
    stdin still open) aborted with "Fatal Python error: _enter_buffered_busy", exit -6. The spec
    line was read whole before this starts; nothing else is ever sent."""
    fd = sys.stdin.fileno()

    def watch() -> None:
        with contextlib.suppress(OSError):
            while os.read(fd, 4096):
                pass
        with contextlib.suppress(RuntimeError):  # the loop already closed
            loop.call_soon_threadsafe(task.cancel)

    threading.Thread(target=watch, name="api stdin watch", daemon=True).start()


def pin_to_cpus(cpus: tuple[int, ...]) -> str:
    """Keep this process on ``cpus`` (empty: leave it anywhere); what it runs on, for the log.
    A CPU this host does not have is a tuning mistake, not a reason to go without an API."""
    if not cpus:
        return "any"
    try:
        os.sched_setaffinity(0, cpus)
    except (OSError, ValueError) as exc:
        log.error("[api] process_cpus %s cannot be used here (%s): running on any CPU", cpus, exc)
        return "any"
    return ",".join(str(cpu) for cpu in sorted(os.sched_getaffinity(0)))


def main() -> int:
    spec = ApiProcessSpec.model_validate_json(sys.stdin.buffer.readline())
    os.nice(spec.api.process_nice)  # the daemon's decisions come first on a busy machine
    try:
        configure_logging(
            spec.log_level, [spec.token], config=spec.log, log_file=spec.logs_dir / API_LOG_NAME
        )
    except RefuseToStartError as exc:  # was a traceback, and the daemon started it again
        print(f"vigil API: {as_one_line(str(exc))}", file=sys.stderr)
        return EXIT_LOG_REFUSED
    cpus = pin_to_cpus(spec.api.process_cpus)
    log.info("API process %s at niceness +%s on CPUs %s", os.getpid(), spec.api.process_nice, cpus)
    return asyncio.run(_serve(spec))


if __name__ == "__main__":
    sys.exit(main())


__all__ = [
    "API_LOG_NAME",
    "EXIT_LOG_REFUSED",
    "ApiProcessSpec",
    "build_process_server",
    "main",
    "pin_to_cpus",
    "run_api_process",
]
