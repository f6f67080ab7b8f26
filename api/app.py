"""The FastAPI app: status, positions, trades, decisions, memory notes, trading halt/resume.

Built by ``create_app`` from an ``ApiContext``: the state dir's files always, and the running
daemon's ports when there is one (``vigil run``); ``vigil serve`` has only the files. Every data
route needs the bearer token; ``/healthz`` does not. Bad input is a 4xx with the reason, never a 500.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations, and one of
# them uses the configured page size
import asyncio
import json
import math
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Query, Request, status
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel
from starlette.exceptions import HTTPException as StarletteHTTPException

from api.admission import Admission, AdmissionControl
from api.allow import allowed_methods
from api.auth import BearerAuth
from api.bodylimit import BodyLimit
from api.cache import ResponseCache, file_version
from api.config import ApiConfig
from api.cost import JournalCost
from api.dashboard import add_dashboard
from api.docs import add_docs
from api.files import StateDirFiles, StateFileError, journal_error, no_account
from api.metrics import DaemonMetrics
from api.models import (
    TOO_LARGE_BODY,
    UNREADABLE_BODY,
    AccountBody,
    DecisionsPage,
    ErrorBody,
    HaltRequest,
    InvalidBody,
    LastDecisionBody,
    MemoryBody,
    NotesEdit,
    NotesEditResult,
    StatusBody,
    TradesPage,
    TradingBody,
)
from api.notes import (
    NotesConflictError,
    NotesRejectedError,
    NotesUnwritableError,
    apply_notes_edit,
)
from api.ports import LiveDaemon, TradingControl
from api.proxy import LiveProxy, Upstream
from api.ratelimit import RateLimit, TokenBucket
from core.errors import VigilError
from state.memory_clip import AGENT_MEMORY_MAX_CHARS
from state.memory_history import memory_history

NO_DAEMON = "no daemon is running on this state dir (vigil serve reads its files)"
NO_TRADING_STATE = "this build has no trading state (ACTIVE/HALTED)"
#: the trading memory (memory.db or Neo4j) is not read here: its store belongs to the daemon and
#: ``vigil memory``, which rank its lessons against a market situation
MEMORY_NOT_SERVED = (
    "the trading memory's lessons are not served by the API: `vigil memory list`, `search` or "
    "`stats` on the state dir"
)

#: a 422 lists this many of the request's validation errors, then says how many more
ISSUES_LISTED = 50

#: routers added by later parts (metrics, stream, dashboard, runs): given the app and its context
Extension = Callable[[FastAPI, "ApiContext", BearerAuth], None]


@dataclass
class ApiContext:
    files: StateDirFiles
    config: ApiConfig
    token: str
    daemon: LiveDaemon | None = None
    trading: TradingControl | None = None
    metrics: DaemonMetrics | None = None
    extensions: list[Extension] = field(default_factory=list)
    prices_as_of: str | None = None  # the configured model price table's date (cost figures)
    #: a decision is in flight (the daemon's routine): admission runs one request meanwhile
    trading_busy: Callable[[], bool] | None = None
    #: the API process: the daemon's private API answers the live routes (``api.proxy``)
    upstream: Upstream | None = None


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "no or wrong bearer token"},
    409: {"model": ErrorBody, "description": "a state-dir file cannot be read"},
    429: {"model": ErrorBody, "description": "over [api] max_requests_per_sec (Retry-After)"},
    503: {
        "model": ErrorBody,
        "description": "no daemon runs on this state dir, it does not answer, or the API is "
        "busy (Retry-After)",
    },
}


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(StateFileError)
    async def _state_file_error(_request: Request, exc: StateFileError) -> Response:
        return _error(str(exc), status.HTTP_409_CONFLICT)

    @app.exception_handler(RequestValidationError)
    async def _invalid_request(_request: Request, exc: RequestValidationError) -> Response:
        return _error(_listed(exc.errors()), status.HTTP_422_UNPROCESSABLE_CONTENT)

    @app.exception_handler(StarletteHTTPException)
    async def _http_error(request: Request, exc: StarletteHTTPException) -> Response:
        headers = exc.headers
        if exc.status_code == status.HTTP_405_METHOD_NOT_ALLOWED:
            allowed = allowed_methods(app.router.routes, request.scope)
            headers = headers if allowed is None else {**(headers or {}), "Allow": allowed}
        # a reason may quote the input (a ticker of POST /api/runs): half a surrogate pair too
        return _error(jsonable_encoder(exc.detail), exc.status_code, headers)


def _listed(errors: Sequence[Any]) -> list[Any]:
    """The first ``ISSUES_LISTED`` validation errors, and how many more there were. All were
    listed: a body of 1 MiB holding 80,000 unknown keys was answered with 8.7 MB, and encoding
    them held the event loop (the daemon's, forwarded from the API process) for 2.5 s."""
    listed: list[Any] = jsonable_encoder(errors[:ISSUES_LISTED])
    if len(errors) > ISSUES_LISTED:
        more = len(errors) - ISSUES_LISTED
        where = list(errors[ISSUES_LISTED]["loc"][:1])  # body, query, path
        listed.append({"loc": where, "msg": f"and {more:,} more", "type": "more_not_listed"})
    return listed


def _error(detail: object, code: int, headers: Mapping[str, str] | None = None) -> Response:
    """``{"detail": ...}`` as ASCII JSON. FastAPI's handlers encode it as UTF-8, which fails
    on half of a surrogate pair that a JSON body escaped and the reason echoes: a 500 for a bad
    request. ASCII JSON escapes it again."""
    body = json.dumps({"detail": _finite(detail)}).encode()
    return Response(body, code, headers, media_type="application/json")


def _finite(value: object) -> object:
    """A validation error echoes its input, and json writes a NaN the body held as the literal
    ``NaN``, which JSON has not (a client's parser refused the whole answer): its name instead."""
    if isinstance(value, float) and not math.isfinite(value):
        return json.dumps(value)  # "NaN", "Infinity", "-Infinity": what the client sent
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def create_app(ctx: ApiContext) -> FastAPI:
    app = FastAPI(
        title="vigil",
        summary="The operator's API of the vigil trading daemon",
        version="1",
        responses=_ERRORS,
        docs_url=None,  # served offline by add_docs
        redoc_url=None,  # ReDoc loads from a CDN: Swagger UI at /docs reads the same schema
    )
    add_docs(app)
    auth = BearerAuth(ctx.token)
    authed = [Depends(auth)]
    cost = JournalCost(ctx.files.decisions_path, ctx.config.cost_days, ctx.prices_as_of)
    config, files = ctx.config, ctx.files
    cache = app.state.cache = ResponseCache()
    live_secs = config.live_cache_ms / 1000

    def journal_version() -> object:
        # the live file and its folder (a rotation or a retention sweep changes the folder)
        return file_version(files.decisions_path, files.decisions_path.parent)

    _add_guards(app, ctx, auth, journal_version)

    _add_error_handlers(app)

    @app.get("/healthz", tags=["health"])
    async def healthz() -> dict[str, Any]:
        """Liveness without a token: is the API up, and how old is the heartbeat."""
        return _healthz(ctx.files)

    @app.get("/api/status", dependencies=authed, tags=["daemon"], response_model=StatusBody)
    async def get_status() -> Response:
        """The daemon's loops, streams, trading state, agent, gate, equity, last decision, and
        the model calls, tokens and dollars of today and the last days (per model, per layer).
        Live figures are at most ``[api] live_cache_ms`` old; a new decision shows at once."""

        async def compute() -> bytes:
            return _json(await _status_with_cost(ctx, cost))

        version = _status_version(ctx, journal_version())
        return _answer(await cache.get("status", compute, version=version, max_age_secs=live_secs))

    @app.get("/api/positions", dependencies=authed, tags=["daemon"], response_model=AccountBody)
    async def get_positions() -> Response:
        """Equity, cash and every open position with its unrealised PnL (at most
        ``[api] live_cache_ms`` old)."""

        async def compute() -> bytes:
            if ctx.daemon is not None:
                return _json(await _live_account(ctx.daemon))
            return await asyncio.to_thread(lambda: _json(files.paper_account()))

        return _answer(await cache.get("positions", compute, max_age_secs=live_secs))

    @app.get("/api/trades", dependencies=authed, tags=["journal"], response_model=TradesPage)
    async def get_trades(
        since: Annotated[int | None, Query(ge=0, description="fills after this ms")] = None,
        limit: Annotated[int, Query(ge=1, le=10_000)] = 200,
    ) -> Response:
        def compute() -> bytes:
            return _json(TradesPage(trades=files.trades(since, limit)))

        version = file_version(files.trades_path)
        return _answer(
            await cache.get(("trades", since, limit), _off_loop(compute), version=version)
        )

    @app.get("/api/decisions", dependencies=authed, tags=["journal"], response_model=DecisionsPage)
    async def get_decisions(
        since: Annotated[
            int | None, Query(ge=0, description="decisions after this at_ms; none: the newest")
        ] = None,
        limit: Annotated[int, Query(ge=1, le=ctx.config.decisions_page_max)] = 50,
    ) -> Response:
        """Decision lines of decisions.jsonl and its rotated segments, oldest first."""

        def compute() -> bytes:
            return _json(files.decisions(since, limit))

        key, version = ("decisions", since, limit), journal_version()
        return _answer(await cache.get(key, _off_loop(compute), version=version))

    @app.get("/api/memory", dependencies=authed, tags=["memory"])
    async def get_memory() -> MemoryBody:
        state = ctx.files.runner_state()
        return MemoryBody(
            agent_memory=state.agent_memory,
            notes=state.notes,
            agent_memory_max_chars=AGENT_MEMORY_MAX_CHARS,
            history=memory_history(state.extra),
            insights=None,
            unavailable={"insights": MEMORY_NOT_SERVED},
        )

    @app.put(
        "/api/memory/notes",
        dependencies=authed,
        tags=["memory"],
        responses={
            400: UNREADABLE_BODY,
            413: TOO_LARGE_BODY,
            409: {
                "model": ErrorBody,
                "description": "a field changed since based_on, or runner_state.json is unreadable",
            },
            422: {"model": InvalidBody, "description": "the edit is not valid"},
            507: {"model": ErrorBody, "description": "runner_state.json cannot be written"},
        },
    )
    async def put_notes(edit: NotesEdit) -> NotesEditResult:
        """Edit ``agent_memory`` and/or ``notes``, validated like an edit of the file."""
        return _notes_edited(ctx, edit)

    @app.post(
        "/api/trading/halt",
        dependencies=authed,
        tags=["trading"],
        responses={400: UNREADABLE_BODY, 413: TOO_LARGE_BODY},
    )
    async def halt(request: HaltRequest | None = None) -> TradingBody:
        control = _trading(ctx)
        return control.halt((request or HaltRequest()).reason)

    @app.post("/api/trading/resume", dependencies=authed, tags=["trading"])
    async def resume() -> TradingBody:
        return _trading(ctx).resume()

    @app.get(
        "/metrics",
        dependencies=authed,
        tags=["metrics"],
        response_class=Response,
        responses={200: {"content": {CONTENT_TYPE_LATEST: {}}}},
    )
    async def metrics() -> Response:
        """Prometheus text format (scrape with ``authorization: {credentials: <token>}``)."""
        if ctx.daemon is None or ctx.metrics is None:
            raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, NO_DAEMON)
        daemon, registry = ctx.daemon, ctx.metrics

        async def compute() -> bytes:
            return registry.render(daemon.counts(), daemon.agent(), await _live_account(daemon))

        body = await cache.get("metrics", compute, max_age_secs=live_secs)
        return Response(body, media_type=CONTENT_TYPE_LATEST)

    add_dashboard(app, ctx.files.decisions_path, auth, cache, journal_version)
    for extend in ctx.extensions:
        extend(app, ctx, auth)
    return app


def _add_guards(
    app: FastAPI, ctx: ApiContext, auth: BearerAuth, journal_version: Callable[[], object]
) -> None:
    """Admission control, then (the API process) the daemon's live routes, then the body's
    ceiling, then the rate ceiling: the last added runs first, so a request over the rate costs
    nothing more."""
    config = ctx.config
    admission = app.state.admission = Admission(
        config.max_in_flight, config.admission_wait_ms / 1000, ctx.trading_busy or (lambda: False)
    )
    app.add_middleware(
        AdmissionControl, admission=admission, retry_after_secs=config.busy_retry_after_secs
    )
    if ctx.upstream is not None:
        app.add_middleware(
            LiveProxy,
            upstream=ctx.upstream,
            auth=auth,
            live_cache_secs=config.live_cache_ms / 1000,
            journal_version=journal_version,
        )
    app.add_middleware(BodyLimit)  # around the proxy: a forward reads the body whole
    if config.max_requests_per_sec > 0:
        rate = config.max_requests_per_sec
        app.add_middleware(
            RateLimit,
            bucket=TokenBucket(rate),
            authorised=lambda scope: auth.scope_refusal(scope) is None,
            anonymous=TokenBucket(rate),
        )


def _json(body: BaseModel) -> bytes:
    return body.model_dump_json(by_alias=True).encode()


def _answer(body: bytes) -> Response:
    return Response(body, media_type="application/json")


def _off_loop(work: Callable[[], bytes]) -> Callable[[], Awaitable[bytes]]:
    """File reads and parsing on a worker thread: a slow disk does not stall the daemon's loop."""
    return lambda: asyncio.to_thread(work)


async def _live_account(daemon: LiveDaemon) -> AccountBody:
    """The broker's account, or none and why: an exchange that is down or disagrees (its typed
    errors) was a 500 on every route showing the account; the routine meets the error itself."""
    try:
        return await daemon.account()
    except VigilError as exc:
        return no_account(f"the broker cannot say: {exc}")


def _notes_edited(ctx: ApiContext, edit: NotesEdit) -> NotesEditResult:
    """The edit made, or the HTTP error that says why not."""
    try:
        return apply_notes_edit(ctx.files, edit, ctx.daemon)
    except NotesConflictError as exc:
        raise HTTPException(status.HTTP_409_CONFLICT, str(exc)) from None
    except NotesRejectedError as exc:
        raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
    except NotesUnwritableError as exc:
        raise HTTPException(status.HTTP_507_INSUFFICIENT_STORAGE, str(exc)) from None


def _trading(ctx: ApiContext) -> TradingControl:
    if ctx.daemon is None:
        raise HTTPException(status.HTTP_503_SERVICE_UNAVAILABLE, NO_DAEMON)
    if ctx.trading is None:
        raise HTTPException(status.HTTP_501_NOT_IMPLEMENTED, NO_TRADING_STATE)
    return ctx.trading


def _status_version(ctx: ApiContext, journal: object) -> object:
    """What a cached status answer depends on: the journal, and without a daemon (``vigil
    serve``) ``runner_state.json`` too, so a halt written there shows at once."""
    if ctx.daemon is None:
        return (journal, file_version(ctx.files.runner_state_path))
    return journal


async def _status_with_cost(ctx: ApiContext, cost: JournalCost) -> StatusBody:
    status = await _status(ctx)
    try:
        # a rotated journal is re-read: off the event loop
        body = await asyncio.to_thread(cost.body, status.now_ms)
    except OSError as exc:  # a torn segment: the other figures are still worth giving
        why = {**status.unavailable, "cost": str(journal_error(exc))}
        return status.model_copy(update={"unavailable": why})
    left_out = cost.left_out()
    if left_out is None:
        return status.model_copy(update={"cost": body})
    why = {**status.unavailable, "cost_lines": f"not summed: {left_out}"}
    return status.model_copy(update={"cost": body, "unavailable": why})


def _healthz(files: StateDirFiles) -> dict[str, Any]:
    age, problem = files.heartbeat()
    if problem is None:
        return {"ok": True, "heartbeat_age_secs": age}
    return {"ok": True, "heartbeat_age_secs": age, "heartbeat_unavailable": problem}


async def _status(ctx: ApiContext) -> StatusBody:
    files, daemon = ctx.files, ctx.daemon
    unavailable: dict[str, str] = {}
    trading = TradingBody(state=None)
    if ctx.trading is not None:
        trading = ctx.trading.trading()
    elif daemon is None:  # vigil serve: the switch is in runner_state.json, as vigil status reads
        try:
            trading = files.trading()
        except StateFileError as exc:
            unavailable["trading"] = str(exc)
    else:
        unavailable["trading"] = NO_TRADING_STATE
    try:
        last_decision = files.last_decision()
    except StateFileError as exc:
        last_decision, unavailable["last_decision"] = None, str(exc)
    if daemon is None:
        account = files.paper_account()
        for name in ("loops", "streams", "agent", "gate"):
            unavailable[name] = NO_DAEMON
        now_ms = _files_now_ms(last_decision)
        loops = streams = agent = gate = None
    else:
        account = await _live_account(daemon)
        now_ms, loops, streams, agent, gate = (
            daemon.now_ms(),
            daemon.loops(),
            daemon.streams(),
            daemon.agent(),
            daemon.gate(),
        )
    if account.equity_usd is None:
        unavailable["equity_usd"] = "; ".join(account.unavailable.values()) or "unknown"
    heartbeat_age, problem = files.heartbeat()
    if problem is not None:
        unavailable["heartbeat"] = problem
    return StatusBody(
        source="state_dir" if daemon is None else "daemon",
        now_ms=now_ms,
        heartbeat_age_secs=heartbeat_age,
        loops=loops,
        streams=streams,
        trading=trading,
        agent=agent,
        gate=gate,
        equity_usd=account.equity_usd,
        open_positions=len(account.positions) if "account" not in account.unavailable else None,
        last_decision=last_decision,
        unavailable=unavailable,
    )


def _files_now_ms(last: LastDecisionBody | None) -> int:
    """``now`` of a state dir with no daemon (``vigil serve``): its last decision's instant, as
    ``vigil status`` has it, so a replay's or a simulated run's cost days are its own days (the
    wall clock's day left its cost table empty); the wall clock before any decision."""
    if last is not None:
        return last.at_ms
    return int(time.time() * 1000)


__all__ = ["ApiContext", "Extension", "create_app"]
