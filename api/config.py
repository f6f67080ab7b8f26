"""``[api]``: where the operator's HTTP API listens, and its bounds."""

from __future__ import annotations

import ipaddress
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

#: the default port of the API (``vigil run`` and ``vigil serve``); 0 picks a free one
DEFAULT_PORT = 8780
#: a token travels in a request's header, which the server takes up to 16 KiB in all
TOKEN_MAX_CHARS = 4096


class ApiConfig(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    enabled: bool = True  # the API loop of ``vigil run`` (``vigil serve`` always serves)
    # "process": the API answers from its own process (niced by process_nice), asking the
    # daemon's loop for live figures over a private loopback link at most once per route per
    # live_cache_ms; "inline": on the daemon's own event loop (one process, every request there)
    isolation: Literal["process", "inline"] = "process"
    process_nice: int = Field(10, ge=0, le=19)  # the API process's niceness above the daemon's
    # the CPUs the API process may run on (empty: any). On a small host, keeping the API and its
    # clients' work on one core leaves the other cores to the daemon: niceness alone does not,
    # a woken daemon still waits for a busy core (README: "The API protects the trading loop")
    process_cpus: tuple[Annotated[int, Field(ge=0, le=4095)], ...] = ()
    host: str = "127.0.0.1"  # a non-loopback address needs a configured token (VIGIL_API_TOKEN)
    port: int = Field(DEFAULT_PORT, ge=0, le=65535)
    decisions_page_max: int = Field(500, ge=1, le=10_000)  # most lines one /api/decisions answers
    stream_queue_size: int = Field(256, ge=1)  # SSE: decisions a slow client may lag behind
    runs_queue_size: int = Field(4, ge=1)  # replay jobs waiting; more are refused (429)
    runs_concurrency: int = Field(1, ge=1, le=4)  # replay jobs running at once
    cost_days: int = Field(7, ge=1, le=366)  # /api/status: the model cost of this many UTC days
    runs_max_days: int = Field(366, ge=1)  # the longest span one POST /api/runs may ask
    # admission control (api.admission): requests in flight on the daemon's loop at once; more
    # wait up to admission_wait_ms, then get 503 with Retry-After: busy_retry_after_secs
    max_in_flight: int = Field(4, ge=1, le=1024)
    admission_wait_ms: int = Field(1000, ge=0, le=60_000)
    busy_retry_after_secs: int = Field(1, ge=1, le=3600)
    # api.cache: the oldest a live figure may be (/api/status, /api/positions, /metrics); journal
    # answers are recomputed when the files change, whatever this says. 0: computed every time
    live_cache_ms: int = Field(1000, ge=0, le=60_000)
    # api.ratelimit: the most requests answered a second (more get 429 + Retry-After); bounds
    # what the API and its clients take of the machine's cores (a dashboard asks a few a
    # second, a Prometheus scrape one in 15 s). 0: no ceiling
    max_requests_per_sec: float = Field(200, ge=0, le=1_000_000)


def token_problem(token: str) -> str | None:
    """Why no client can present ``token`` as ``Authorization: Bearer <token>``, or None. Such a
    token was taken, and the API then refused every request as a wrong token: a header is
    latin-1 text without its outer spaces (a non-ASCII letter arrives as other bytes, a space at
    either end is dropped), and one past the server's header bound is never read. The reason
    never quotes the token: it is a secret."""
    if not token.strip():
        return "the API token is only spaces: no request can carry it"
    if len(token) > TOKEN_MAX_CHARS:
        return (
            f"the API token is {len(token):,} characters: at most {TOKEN_MAX_CHARS:,} fit a header"
        )
    for at, char in enumerate(token):
        if not " " <= char <= "~":
            return (
                f"the API token has a character that is not visible ASCII at position {at + 1} "
                "(a control character or a non-ASCII letter): a request's header cannot carry it"
            )
    if token != token.strip(" "):
        return "the API token begins or ends with a space, which a request's header drops"
    return None


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
