"""``vigil status``: equity, positions with PnL, PnL today, trading state, breaker, budget left,
health and the last decision, on one screen.

From the daemon's API when it serves one on this state dir (its URL in ``api.json``, the token from
VIGIL_API_TOKEN / the secret file / ``<state dir>/api_token``), else from the state dir's files,
where what only a running daemon knows (breaker, budget) is reported unavailable with the reason.
Health is the heartbeat's verdict (as ``vigil health``) either way; the exit code is 1 when unhealthy.
"""

from __future__ import annotations

import sys
import time
import urllib.error
import urllib.request
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.auth import read_token_file
from api.files import StateDirFiles, StateFileError
from api.models import AccountBody, DecisionsPage, LastDecisionBody, StatusBody, TradingBody
from api.server import read_endpoint
from core.clock import DAY_MS
from core.errors import EXIT_REFUSE_TO_START, EXIT_UNHEALTHY
from runner.config import Settings
from runner.heartbeat import check_health
from state.segments import LINE_MAX_BYTES

#: the whole of one request to the API, not each socket read: a server that drips its answer
#: (one named in a planted api.json, say) kept ``status`` waiting for as long as it dripped
API_TIMEOUT_SECS: Final = 5.0
#: the daemon's answers are kilobytes (its decisions page asks for one line, at most the
#: journal's line bound); past this a server is not vigil's API, and its answer is not held
ANSWER_MAX_BYTES: Final = LINE_MAX_BYTES + (1 << 20)
_READ_BYTES: Final = 1 << 16
NEEDS_DAEMON: Final = "only a running daemon knows it (its API is not serving)"


class StatusView(BaseModel):
    """What ``vigil status`` shows (``--json`` prints it as is)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    source: Literal["api", "state_dir"]
    where: str  # the API's URL or the state dir
    now_ms: int  # the daemon's clock (API), else the newest decision's instant or wall time
    healthy: bool
    health: list[str]
    trading: TradingBody
    breaker: str | None
    budget_left_today_usd: float | None
    budget_limit_usd: float | None
    account: AccountBody
    pnl_today_usd: float | None
    pnl_today_since_ms: int | None  # the first decision of the UTC day: PnL's baseline
    last_decision: LastDecisionBody | None
    unavailable: dict[str, str] = Field(default_factory=dict)


def status_command(settings: Settings, *, as_json: bool = False) -> int:
    from runner.status_render import render  # it imports StatusView from here

    state_dir = settings.state_dir
    if state_dir.exists() and not state_dir.is_dir():  # every file read below would fail on it
        print(f"vigil status: the state dir {state_dir} is not a directory", file=sys.stderr)
        return EXIT_REFUSE_TO_START  # as vigil trading's for a state it cannot use
    view = collect(settings)
    print(view.model_dump_json(indent=2) if as_json else render(view))
    return 0 if view.healthy else EXIT_UNHEALTHY


def collect(settings: Settings) -> StatusView:
    """From the API when one serves this state dir, else from the files (saying why)."""
    url = read_endpoint(settings.state_dir)
    fallback_reason = "no daemon API is serving this state dir"
    if url is not None:
        token = _token(settings)
        if token is None:
            fallback_reason = f"the API at {url} needs a token (VIGIL_API_TOKEN)"
        else:
            try:
                return _from_api(settings, url.rstrip("/"), token)
            except (OSError, ValueError) as exc:  # down, refused, timed out, or not our API
                fallback_reason = f"the API at {url} did not answer: {exc}"
    return _from_files(settings, fallback_reason)


def _token(settings: Settings) -> str | None:
    if settings.api_token is not None:
        return settings.api_token.get_secret_value()
    return read_token_file(settings.state_dir)


def _health(settings: Settings) -> tuple[bool, list[str]]:
    status = check_health(
        settings.heartbeat_path,
        settings.supervisor.heartbeat_stale_secs,
        time.time(),
        market_stale_secs=settings.supervisor.market_stale_secs,
    )
    return status.healthy, list(status.reasons or (status.reason,))


def _get(url: str, token: str) -> bytes:
    """The answer's body, within ``API_TIMEOUT_SECS`` in all and ``ANSWER_MAX_BYTES``; else
    ``OSError`` (too slow) or ``ValueError`` (too large): either is no answer from our API."""
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + API_TIMEOUT_SECS
    body = bytearray()
    try:
        with urllib.request.urlopen(request, timeout=API_TIMEOUT_SECS) as response:
            while chunk := response.read1(_READ_BYTES):  # what one socket read gives
                body += chunk
                if len(body) > ANSWER_MAX_BYTES:
                    raise ValueError(f"{url} answered over {ANSWER_MAX_BYTES:,} bytes")
                if time.monotonic() > deadline:
                    raise OSError(f"{url} took over {API_TIMEOUT_SECS:g} s to answer")
    except urllib.error.HTTPError as exc:
        raise OSError(f"HTTP {exc.code} from {url}") from None
    return bytes(body)


def _from_api(settings: Settings, base: str, token: str) -> StatusView:
    status = StatusBody.model_validate_json(_get(f"{base}/api/status", token))
    account = AccountBody.model_validate_json(_get(f"{base}/api/positions", token))
    since = _midnight_ms(status.now_ms) - 1
    page = DecisionsPage.model_validate_json(
        _get(f"{base}/api/decisions?since={since}&limit=1", token)
    )
    healthy, health = _health(settings)
    agent = status.agent
    unavailable = dict(status.unavailable)
    if agent is None:
        unavailable.setdefault("breaker", NEEDS_DAEMON)
    return _view(
        "api",
        base,
        status.now_ms,
        (healthy, health),
        status.trading,
        account,
        page,
        status.last_decision,
        agent_figures=(
            None if agent is None else agent.breaker,
            None if agent is None else agent.budget_left_today_usd,
            None if agent is None else agent.budget_limit_usd,
        ),
        unavailable=unavailable,
    )


def _from_files(settings: Settings, why: str) -> StatusView:
    files = StateDirFiles(settings.state_dir)
    unavailable = {"breaker": NEEDS_DAEMON, "budget_left_today_usd": NEEDS_DAEMON, "api": why}
    try:
        trading = files.trading()
    except StateFileError as exc:
        trading = TradingBody(state=None)
        unavailable["trading"] = str(exc)
    account = files.paper_account()
    last = files.last_decision()
    # a stopped daemon's "today" is the day of its last decision (the simulator's, under --sim)
    now_ms = last.at_ms if last is not None else int(time.time() * 1000)
    page = files.decisions(_midnight_ms(now_ms) - 1, 1)
    return _view(
        "state_dir",
        str(settings.state_dir),
        now_ms,
        _health(settings),
        trading,
        account,
        page,
        last,
        agent_figures=(None, None, None),
        unavailable=unavailable,
    )


def _view(
    source: Literal["api", "state_dir"],
    where: str,
    now_ms: int,
    health: tuple[bool, list[str]],
    trading: TradingBody,
    account: AccountBody,
    today: DecisionsPage,
    last: LastDecisionBody | None,
    *,
    agent_figures: tuple[str | None, float | None, float | None],
    unavailable: dict[str, str],
) -> StatusView:
    pnl, since_ms = _pnl_today(account, today)
    if pnl is None:
        unavailable["pnl_today_usd"] = (
            "no equity now" if account.equity_usd is None else "no decision with equity today"
        )
    unavailable.update({f"account.{k}": v for k, v in account.unavailable.items()})
    breaker, left, limit = agent_figures
    return StatusView(
        source=source,
        where=where,
        now_ms=now_ms,
        healthy=health[0],
        health=health[1],
        trading=trading,
        breaker=breaker,
        budget_left_today_usd=left,
        budget_limit_usd=limit,
        account=account,
        pnl_today_usd=pnl,
        pnl_today_since_ms=since_ms,
        last_decision=last,
        unavailable=unavailable,
    )


def _pnl_today(account: AccountBody, today: DecisionsPage) -> tuple[float | None, int | None]:
    """Equity now minus the portfolio value the day's first decision saw."""
    if account.equity_usd is None or not today.decisions:
        return None, None
    first = today.decisions[0]
    value = (first.snapshot or {}).get("portfolio_value")
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None, None
    return round(account.equity_usd - float(value), 2), first.at_ms


def _midnight_ms(at_ms: int) -> int:
    return at_ms - at_ms % DAY_MS


__all__ = ["EXIT_UNHEALTHY", "StatusView", "collect", "status_command"]
