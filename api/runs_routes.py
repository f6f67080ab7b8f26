"""``/api/runs``: submit a replay (``POST``), see one (``GET /api/runs/{id}``), list them.

Bad input is a 422 with the reason (FastAPI's validation of ``RunRequest``, or the launcher's
``RunRejectedError``: an unknown ticker, a decider without its key); a submission while the queue
is full is a 429; one whose files cannot be written (a full disk) a 507 naming the file; an unknown
id a 404.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations
from typing import Annotated, Any

from fastapi import Depends, FastAPI, HTTPException, Path, status

from api.auth import BearerAuth
from api.models import TOO_LARGE_BODY, UNREADABLE_BODY, ErrorBody, InvalidBody
from api.runs import RunQueue, RunRejectedError, RunsFullError, RunsUnwritableError
from api.runs_models import RunAccepted, RunBody, RunRequest, RunsList

RUN_ID_PATTERN = r"^[0-9A-Za-z-]{1,64}$"


def run_routes(queue: RunQueue) -> Any:
    """The extension adding the runs routes on ``queue``."""

    def extend(app: FastAPI, _ctx: Any, auth: BearerAuth) -> None:
        authed = [Depends(auth)]

        @app.post(
            "/api/runs",
            dependencies=authed,
            tags=["runs"],
            status_code=status.HTTP_202_ACCEPTED,
            responses={
                400: UNREADABLE_BODY,
                413: TOO_LARGE_BODY,
                422: {"model": InvalidBody, "description": "the request cannot run"},
                429: {"model": ErrorBody, "description": "the queue is full"},
                507: {"model": ErrorBody, "description": "the run's files cannot be written"},
            },
        )
        async def submit(request: RunRequest) -> RunAccepted:
            """Queue a replay; it runs in a child process, its files under runs/<run_id>/."""
            try:
                job = queue.submit(request)
            except RunRejectedError as exc:
                raise HTTPException(status.HTTP_422_UNPROCESSABLE_CONTENT, str(exc)) from None
            except RunsFullError as exc:
                raise HTTPException(status.HTTP_429_TOO_MANY_REQUESTS, str(exc)) from None
            except RunsUnwritableError as exc:
                raise HTTPException(status.HTTP_507_INSUFFICIENT_STORAGE, str(exc)) from None
            return RunAccepted(run_id=job.run_id, status=job.status)

        @app.get("/api/runs", dependencies=authed, tags=["runs"])
        async def listing() -> RunsList:
            """Every run of this state dir, newest first."""
            return queue.listing()

        @app.get(
            "/api/runs/{run_id}",
            dependencies=authed,
            tags=["runs"],
            responses={404: {"model": ErrorBody, "description": "no such run"}},
        )
        async def one(run_id: Annotated[str, Path(pattern=RUN_ID_PATTERN)]) -> RunBody:
            """The run's status; when finished, its report summary (or why there is none)."""
            job = queue.get(run_id)
            if job is None:
                raise HTTPException(status.HTTP_404_NOT_FOUND, f"no run {run_id!r}")
            return job

    return extend


__all__ = ["run_routes"]
