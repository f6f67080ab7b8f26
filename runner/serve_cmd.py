"""``vigil serve``: the operator's API on a state dir without a daemon (a finished run, a replay's
folder, a stopped daemon's files). It answers from the files and says what needs a daemon."""

from __future__ import annotations

import asyncio
from contextlib import suppress

from api.app import ApiContext, create_app
from api.auth import TOKEN_FILE_NAME, resolve_token
from api.files import StateDirFiles
from api.runs import RunQueue
from api.runs_routes import run_routes
from api.server import ApiServer, read_endpoint
from api.stream import stream_routes
from core.errors import RefuseToStartError
from runner.config import Settings
from runner.logging_setup import configure_logging
from runner.runs_launcher import build_run_queue
from runner.stop_signals import on_stop_signals
from state.daemon_lock import DaemonLock
from state.state_dir import refuse_package_dir


def build_serve(settings: Settings) -> tuple[ApiServer, RunQueue]:
    """The server and its replay queue (whose workers ``serve`` runs beside it)."""
    state_dir = settings.state_dir
    if not state_dir.is_dir():
        raise RefuseToStartError(f"{state_dir} is not a state dir (no such folder)")
    running = read_endpoint(state_dir)
    if running is not None:
        raise RefuseToStartError(f"the daemon on {state_dir} already serves its API at {running}")
    runs = build_run_queue(settings)
    configured = settings.api_token.get_secret_value() if settings.api_token else None
    ctx = ApiContext(
        files=StateDirFiles(state_dir),
        config=settings.api,
        token=resolve_token(configured, settings.api.host, state_dir),
        extensions=[stream_routes(None), run_routes(runs)],
        prices_as_of=settings.agent.prices.as_of,
    )
    return ApiServer(create_app(ctx), settings.api.host, settings.api.port, state_dir), runs


async def serve(settings: Settings) -> int:
    refuse_package_dir(settings.state_dir)
    # the daemon's lock, as a daemon holds it: a daemon started on a folder being served took
    # over its api.json, and this stop deleted the daemon's (its runs shown failed, its API lost)
    lock = DaemonLock(settings.state_dir, holder="vigil serve")
    if settings.state_dir.is_dir():  # else build_serve says there is no state dir
        lock.acquire(needs_the_file=False)  # a read-only folder is still served
    try:
        return await _serve(settings)
    finally:
        lock.release()


async def _serve(settings: Settings) -> int:
    configure_logging(
        settings.log_level,
        settings.secret_values(),
        config=settings.log,
        log_file=settings.logs_dir / "serve.log",  # beside a daemon's vigil.log, not into it
    )
    server, runs = build_serve(settings)
    task = asyncio.create_task(server.run(), name="api")
    workers = asyncio.create_task(runs.run(), name="api runs")
    loop = asyncio.get_running_loop()
    on_stop_signals(loop, lambda _name: task.cancel())
    started = asyncio.create_task(server.started.wait())
    await asyncio.wait({task, started}, return_when=asyncio.FIRST_COMPLETED)
    if server.url is not None and not task.done():
        token_hint = (
            "VIGIL_API_TOKEN" if settings.api_token else settings.state_dir / TOKEN_FILE_NAME
        )
        print(f"serving {settings.state_dir} at {server.url} (token: {token_hint})", flush=True)
    started.cancel()
    try:
        with suppress(asyncio.CancelledError):
            await task
    except (OSError, UnicodeError) as exc:
        if server.url is not None:
            raise  # it listened: not a refusal to start
        workers.cancel()
        with suppress(asyncio.CancelledError):
            await workers
        # a taken port, an address of another host, a name that does not resolve (or is too
        # long to encode, a UnicodeError): were tracebacks
        where = f"{settings.api.host}:{settings.api.port}"
        raise RefuseToStartError(f"the API cannot listen on {where}: {exc}") from None
    workers.cancel()  # a running replay gets SIGTERM: it stops in order, its job is failed
    with suppress(asyncio.CancelledError):
        await workers
    return 0


__all__ = ["build_serve", "serve"]
