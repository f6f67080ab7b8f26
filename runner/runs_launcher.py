"""The API's replay jobs as ``vigil replay`` child processes (``api.runs.RunLauncher``).

A request is checked here as the CLI would check it (configured tickers, a model decider's key and
budget), so a run that cannot start is a 422 now rather than a failed job later; what only the
replay can know (the recorded data's span) fails the job with the replay's own message. The child
inherits the environment (``VIGIL_*``, ``VIGIL_CONFIG_FILE``) and the working directory, so it
reads the same configuration as the daemon that started it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from api.runs import RunLimits, RunQueue, RunRejectedError
from api.runs_models import RunRequest
from runner.config import Settings
from runner.own_module import own_module

MODEL_DECIDERS = ("claude", "debate")


class ReplayLauncher:
    def __init__(self, settings: Settings) -> None:
        self._settings = settings

    def argv(self, request: RunRequest, out_dir: Path) -> Sequence[str]:
        tickers = tuple(request.tickers or self._settings.market.tickers)
        self._check(request, tickers)
        argv = [
            *own_module("runner.cli"),
            "replay",
            "--from",
            request.from_day.isoformat(),
            "--to",
            request.to_day.isoformat(),
            "--out",
            str(out_dir),
            "--tickers",
            *tickers,
            "--decider",
            request.decider,
            "--seed",
            str(request.seed),
        ]
        if not request.use_memory:
            argv.append("--no-memory")
        if self._settings.data_dir is not None:
            argv += ["--data-dir", str(self._settings.data_dir)]
        return argv

    def _check(self, request: RunRequest, tickers: tuple[str, ...]) -> None:
        """What ``replay_settings`` refuses (the child checks again), as a 422 before queueing.
        (``runner.replay`` sits above the daemon's wiring, which imports this module.)"""
        settings = self._settings
        unknown = [t for t in tickers if t not in settings.market.tickers]
        if unknown:
            raise RunRejectedError(
                f"tickers {', '.join(unknown)}: not configured; known: "
                f"{', '.join(settings.market.tickers)}"
            )
        if request.decider in MODEL_DECIDERS:
            if settings.anthropic_api_key is None:
                raise RunRejectedError(f"decider {request.decider} needs ANTHROPIC_API_KEY")
            if not settings.agent.daily_budget_usd:
                raise RunRejectedError(
                    f"decider {request.decider} needs a daily budget "
                    "(VIGIL_AGENT__DAILY_BUDGET_USD or [agent] daily_budget_usd)"
                )


def build_run_queue(settings: Settings) -> RunQueue:
    config = settings.api
    limits = RunLimits(
        queue_size=config.runs_queue_size,
        concurrency=config.runs_concurrency,
        max_days=config.runs_max_days,
    )
    return RunQueue(settings.state_dir, ReplayLauncher(settings), limits)


__all__ = ["ReplayLauncher", "build_run_queue"]
