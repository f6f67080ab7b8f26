"""ccxt's async ``binanceusdm``: the factory, symbol names, and retries typed by what to do next.

``make_binanceusdm(rest_url)`` builds the client; with ``rest_url`` (the simulator) EVERY Binance
URL in ``exchange.urls['api']`` is re-pointed at it, so nothing can reach the real internet, and the
USDⓈ-M error-code table ccxt selects by hostname is applied to the simulator's URL too (ccxt picks
per-market error tables by the ``fapi.binance.com`` prefix; without this a 503 ``-1008`` would be an
unretryable ``ExchangeError`` against the sim but a retryable ``OperationFailed`` against Binance).

``call_with_retries`` runs one ccxt call and turns ccxt's errors into vigil's: network trouble,
429/418 (``DDoSProtection``/``RateLimitExceeded``), 5xx (``ExchangeNotAvailable``,
``OperationFailed``) and timeouts are retried with capped, jittered backoff on the injected Clock,
waiting at least the server's ``Retry-After``. When attempts run out, or a ban asks for longer than
``RetryPolicy.max_retry_after_secs``, it raises ``CcxtRetryableError`` (a ``RetryableError``: the
caller tries again later). A request the exchange rejects (bad symbol, bad parameter: ccxt's
``ExchangeError``) raises ``CcxtRequestRejectedError``: retrying cannot help.
"""

from __future__ import annotations

import asyncio
import logging
import random
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from pydantic import Field

from core.backoff import Backoff
from core.clock import Clock
from core.errors import RetryableError, VigilError

if TYPE_CHECKING:  # ccxt (~4 s of imports) loads when a client is built, not with this module
    import ccxt.async_support as ccxt_async

log = logging.getLogger(__name__)

T = TypeVar("T")

#: ccxt's binance fetch_ohlcv caps ``limit`` at 1000 (the USDⓈ-M API itself allows 1500)
OHLCV_PAGE_LIMIT = 1000
BINANCE_HOST_SUFFIX = "binance.com"


class CcxtRetryableError(RetryableError):
    """The exchange was unreachable, overloaded or rate-limited: try again later."""

    def __init__(self, message: str, *, retry_after_secs: float | None = None) -> None:
        super().__init__(message)
        self.retry_after_secs = retry_after_secs


class CcxtRequestRejectedError(VigilError):
    """The exchange rejected the request itself (unknown symbol, bad parameter): do not retry."""


class _NothingRaisesThis(Exception):
    """Stands for a ccxt error class while ccxt is not imported (see ``ccxt_error``)."""


def ccxt_error(name: str) -> type[Exception]:
    """ccxt's error class ``name`` (``ccxt.base.errors``), for ``except`` and ``isinstance``.

    While ccxt is not imported no ccxt error can exist (replay's recorded exchange imports it
    before raising one), so a class nothing raises is exact then, and a call site that never met
    ccxt does not pay its imports to learn that. An ``except`` clause evaluates this only when
    something was raised.
    """
    errors = sys.modules.get("ccxt.base.errors")
    if errors is None:
        return _NothingRaisesThis
    error: type[Exception] = getattr(errors, name)
    return error


class RetryPolicy(Backoff):
    """How persistently a ccxt call is retried (``Backoff``, the one policy type, plus the
    longest Retry-After worth waiting out); delays are seconds of the injected Clock."""

    #: a server's Retry-After up to this is waited out (a 429 asks for at most the rest of the
    #: minute); a longer one is a ban: give up at once and let the caller come back later
    max_retry_after_secs: float = Field(120.0, gt=0)


def make_binanceusdm(
    rest_url: str | None, *, timeout_ms: int = 10_000, enable_rate_limit: bool = True
) -> ccxt_async.binanceusdm:
    """A ccxt async ``binanceusdm`` for public market data; ``rest_url`` points it at the simulator.

    ccxt's rate limiter stays on by default even against the simulator: it keeps the client inside
    Binance's weight budget exactly as it would be live, so the sim's weight accounting stays
    meaningful. Builds no connection: the aiohttp session opens on the first request.
    """
    # ccxt's binanceusdm alone, not its hundred other exchanges (market.ccxt_slim): about 65 MB
    # less resident memory, and only a daemon with a client pays even that
    from market.ccxt_slim import exchange_class

    exchange = exchange_class("binanceusdm")(
        {
            "enableRateLimit": enable_rate_limit,
            "timeout": timeout_ms,
            "options": {
                "fetchCurrencies": False,  # a private sapi call; also not served by the sim
                "defaultType": "future",
                "adjustForTimeDifference": False,
                "fetchMarkets": {"types": ["linear"]},
            },
        }
    )
    if rest_url is not None:
        exchange.urls["api"] = _repoint(exchange.urls["api"], rest_url)
        _apply_usdm_error_codes(exchange)
    return exchange


def _repoint(urls: Any, rest_url: str) -> Any:
    """``urls`` with every Binance URL's scheme and host replaced by ``rest_url``'s (path kept)."""
    if isinstance(urls, Mapping):
        return {key: _repoint(value, rest_url) for key, value in urls.items()}
    if isinstance(urls, str):
        parts = urlsplit(urls)
        if parts.hostname and parts.hostname.endswith(BINANCE_HOST_SUFFIX):
            target = urlsplit(rest_url)
            base_path = target.path.rstrip("/")
            return urlunsplit(
                (target.scheme, target.netloc, base_path + parts.path, parts.query, "")
            )
    return urls


def _apply_usdm_error_codes(exchange: ccxt_async.binanceusdm) -> None:
    exceptions = dict(exchange.exceptions)
    linear = exceptions.get("linear", {})
    for kind in ("exact", "broad"):
        exceptions[kind] = {**exceptions.get(kind, {}), **linear.get(kind, {})}
    exchange.exceptions = exceptions


def to_ccxt_symbol(ticker: str) -> str:
    """``BTC/USDT`` -> ``BTC/USDT:USDT`` (ccxt's unified name of the USDT-margined perpetual)."""
    base, _, rest = ticker.partition("/")
    quote = rest.split(":", 1)[0]
    if not base or not quote:
        raise ValueError(f"not a BASE/QUOTE ticker: {ticker!r}")
    return f"{base}/{quote}:{quote}"


def retry_after_secs(exchange: Any) -> float | None:
    """The ``Retry-After`` of the exchange's last response, in seconds, if it sent one."""
    headers = getattr(exchange, "last_response_headers", None) or {}
    for name, value in headers.items():
        if name.lower() == "retry-after":
            try:
                return max(0.0, float(value))
            except (TypeError, ValueError):
                return None
    return None


async def call_with_retries(
    clock: Clock | None,
    call: Callable[[], Awaitable[T]],
    *,
    what: str,
    policy: RetryPolicy,
    retry_after: Callable[[], float | None] = lambda: None,
    rand: Callable[[], float] = random.random,
) -> T:
    """Run ``call`` until it succeeds, retrying transient failures (see the module docstring).

    ``clock`` may be None only with a one-attempt policy (nothing to sleep between attempts).
    """
    if clock is None and policy.max_attempts > 1:
        raise ValueError("retries sleep on a Clock: pass clock, or a policy of 1 attempt")
    for attempt in range(policy.max_attempts):
        try:
            return await call()
        except asyncio.CancelledError:
            raise
        except ccxt_error("OperationFailed") as exc:  # network, 429/418, 5xx, timeouts
            told_to_wait = (ccxt_error("DDoSProtection"), ccxt_error("RateLimitExceeded"))
            hint = retry_after() if isinstance(exc, told_to_wait) else None
            if hint is not None and hint > policy.max_retry_after_secs:
                raise CcxtRetryableError(
                    f"{what}: {type(exc).__name__}, told to wait {hint:.0f} s (a ban); "
                    f"giving up for now: {exc}",
                    retry_after_secs=hint,
                ) from exc
            if attempt + 1 == policy.max_attempts:
                raise CcxtRetryableError(
                    f"{what}: still failing after {policy.max_attempts} attempts: "
                    f"{type(exc).__name__}: {exc}",
                    retry_after_secs=hint,
                ) from exc
            delay = policy.delay_secs(attempt, rand())
            if hint is not None:
                delay = max(delay, hint)
            log.warning(
                "%s failed (%s: %s); retry %d/%d in %.2f s",
                what,
                type(exc).__name__,
                _short(exc),
                attempt + 1,
                policy.max_attempts - 1,
                delay,
            )
            assert clock is not None  # checked above: more than one attempt needs a clock
            await clock.sleep(delay)
        except ccxt_error("BaseError") as exc:  # the request itself is wrong
            raise CcxtRequestRejectedError(f"{what}: {type(exc).__name__}: {exc}") from exc
    raise AssertionError("unreachable: the loop returns or raises")  # pragma: no cover


def _short(exc: BaseException, limit: int = 200) -> str:
    text = str(exc)
    return text if len(text) <= limit else text[:limit] + "..."


__all__ = [
    "OHLCV_PAGE_LIMIT",
    "CcxtRequestRejectedError",
    "CcxtRetryableError",
    "RetryPolicy",
    "call_with_retries",
    "ccxt_error",
    "make_binanceusdm",
    "retry_after_secs",
    "to_ccxt_symbol",
]
