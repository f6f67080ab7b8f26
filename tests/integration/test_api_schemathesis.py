"""Property-based fuzzing of the operator API's OpenAPI schema (schemathesis, in process over
ASGI): whatever a request holds, the answer is no 500, its status is documented for the route, and
its body matches the documented schema. A fixed example budget, derandomised: the same cases on
every run. Bad input must be a 4xx with a reason; the 503 of a missing daemon is avoided by
serving with an idle one (the decision stream, which never ends, is not served)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from fakes.api_support import T0_MS, TOKEN, IdleDaemon, write_state_dir
from hypothesis import HealthCheck, given, settings
from schemathesis import Case, GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.core.result import Ok
from schemathesis.schemas import APIOperation
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.specs.openapi.schemas import OpenApiSchema

from api.app import ApiContext, create_app
from api.config import ApiConfig
from api.files import StateDirFiles
from api.metrics import DaemonCounts, DaemonMetrics
from api.models import TradingBody
from api.runs import RunLimits, RunQueue, RunRejectedError
from api.runs_models import RunRequest
from api.runs_routes import run_routes

EXAMPLES = 100  # per operation with input and mode: the file runs in about 10 s
FIXED = 3  # an operation without input: every request is alike
Operation = APIOperation[Any, Any, Any, Any]
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
]


class ScrapedDaemon(IdleDaemon):
    def counts(self) -> DaemonCounts:
        return DaemonCounts(ticks=0, frames=0)


class Switch:
    """``api.ports.TradingControl`` that remembers a halt."""

    def __init__(self) -> None:
        self.body = TradingBody(state="active", changed_at_ms=T0_MS)

    def trading(self) -> TradingBody:
        return self.body

    def halt(self, reason: str) -> TradingBody:
        self.body = TradingBody(state="halted", reason=reason, changed_at_ms=T0_MS)
        return self.body

    def resume(self) -> TradingBody:
        self.body = TradingBody(state="active", changed_at_ms=T0_MS)
        return self.body


class NoReplay:
    """Checks the tickers as ``runner.runs_launcher`` does; no worker runs a job, so the queue
    fills and further runs get 429."""

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        unknown = set(request.tickers or ()) - {"BTC/USDT", "ETH/USDT", "SOL/USDT"}
        if unknown:
            raise RunRejectedError(f"tickers {', '.join(sorted(unknown))}: not configured")
        return ["true"]


def build_schema(state_dir: Path) -> OpenApiSchema:
    write_state_dir(state_dir)
    ctx = ApiContext(
        files=StateDirFiles(state_dir),
        config=ApiConfig(port=0, max_requests_per_sec=0),
        token=TOKEN,
        daemon=ScrapedDaemon(),
        trading=Switch(),
        metrics=DaemonMetrics(),
        extensions=[run_routes(RunQueue(state_dir, NoReplay(), RunLimits(queue_size=3)))],
    )
    return schemathesis.openapi.from_asgi("/openapi.json", create_app(ctx))


@pytest.mark.parametrize("mode", [GenerationMode.POSITIVE, GenerationMode.NEGATIVE])
def test_no_request_is_a_500_or_off_its_schema(tmp_path: Path, mode: GenerationMode) -> None:
    # schemathesis.pytest.from_fixture fails under pytest 9 (Function._nodeid): one Hypothesis
    # test per operation instead, each with its own budget
    schema = build_schema(tmp_path / "state")
    operations: list[Operation] = []
    for result in schema.get_all_operations():
        assert isinstance(result, Ok), result
        operations.append(result.ok())
    assert len(operations) == 15
    for operation in operations:
        if mode is GenerationMode.NEGATIVE and not _has_input(operation):
            continue  # nothing to get wrong
        budget = EXAMPLES if _has_input(operation) else FIXED

        @given(case=operation.as_strategy(mode))
        @settings(
            max_examples=budget,
            derandomize=True,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        )
        def answer_is_documented(case: Case[Operation]) -> None:
            case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, checks=CHECKS)

        answer_is_documented()


def _has_input(operation: Operation) -> bool:
    return bool(operation.query or operation.path_parameters or operation.body)
