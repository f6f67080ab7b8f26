"""The dashboard: one page (``GET /dashboard``, ``/`` redirects to it) and its static files,
served by the API itself, no build step. Charts are uPlot (MIT, vendored in ``api/static/`` with
its LICENSE).

The page and its scripts hold no data, so they need no token; every figure the page shows comes
from the token-protected API (the token is typed once into the page and kept in the tab's
sessionStorage). ``GET /api/equity`` is the one route added for it: the equity line and drawdown
across the journal's segments.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Final

from fastapi import Depends, FastAPI, Query
from fastapi.responses import FileResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles

from api.auth import BearerAuth
from api.cache import ResponseCache
from api.equity import EquityBody, EquityReader, equity_body
from api.files import journal_error

STATIC_DIR: Final = Path(__file__).resolve().parent / "static"
PAGE: Final = STATIC_DIR / "dashboard.html"
# the page's own scripts and styles only: no inline script, no other origin
CSP: Final = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; frame-ancestors 'none'"
)


def add_dashboard(
    app: FastAPI,
    decisions_path: Path,
    auth: BearerAuth,
    cache: ResponseCache,
    journal_version: Callable[[], object],
) -> None:
    reader = EquityReader(decisions_path)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse("/dashboard")

    @app.get("/dashboard", tags=["dashboard"], response_class=FileResponse)
    async def dashboard() -> FileResponse:
        """The operator's page (no data in it: it reads the API with the token you type in)."""
        return FileResponse(PAGE, media_type="text/html", headers={"Content-Security-Policy": CSP})

    @app.get(
        "/api/equity", dependencies=[Depends(auth)], tags=["journal"], response_model=EquityBody
    )
    async def get_equity(
        max_points: Annotated[int, Query(ge=10, le=5000, description="most points drawn")] = 1000,
    ) -> Response:
        """Equity (the portfolio value at each decision) and drawdown, across journal segments."""

        def compute() -> bytes:
            try:
                series = reader.read()
            except OSError as exc:
                raise journal_error(exc) from None
            return equity_body(series, max_points).model_dump_json().encode()

        async def off_loop() -> bytes:
            # the first read of a long journal must not stall the daemon's event loop
            return await asyncio.to_thread(compute)

        key, version = ("equity", max_points), journal_version()
        body = await cache.get(key, off_loop, version=version)
        return Response(body, media_type="application/json")

    app.mount("/static", StaticFiles(directory=STATIC_DIR), name="static")


__all__ = ["CSP", "STATIC_DIR", "add_dashboard"]
