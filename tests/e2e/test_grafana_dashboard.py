"""``grafana/vigil-dashboard.json`` queries only metrics a running daemon serves: every ``vigil_*``
name in a panel's PromQL is a family (or a family's ``_total`` / ``_bucket`` / ``_sum`` /
``_count`` series) of ``/metrics`` of ``vigil run --sim``, parsed by the Prometheus text parser."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import aiohttp
import pytest
from fakes.api_client import wait_for_api
from fakes.daemon import LIGHT_MARKET, REPO, daemon_env, sim_daemon, stop
from prometheus_client.parser import text_string_to_metric_families

pytestmark = pytest.mark.e2e

DASHBOARD = REPO / "grafana" / "vigil-dashboard.json"
METRIC = re.compile(r"\b(vigil_[a-z_]+)\b")
#: a series name PromQL may use for a family of each type
SUFFIXES = {
    "counter": ("_total",),
    "gauge": ("",),
    "histogram": ("_bucket", "_sum", "_count"),
    "summary": ("_sum", "_count", ""),
}
#: what the dashboard shows and must query (the issue's list)
SHOWN = {
    "vigil_equity_usd",
    "vigil_decisions_total",
    "vigil_gate_passes_total",
    "vigil_breaker_state",
    "vigil_budget_left_usd",
    "vigil_loop_restarts_total",
    "vigil_decision_latency_seconds_bucket",
}


def queried_metrics() -> set[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [target["expr"] for panel in dashboard["panels"] for target in panel.get("targets", [])]
    exprs.append(dashboard["templating"]["list"][1]["query"]["query"])
    return {name for expr in exprs for name in METRIC.findall(expr)}


def served_series(text: str) -> set[str]:
    return {
        family.name + suffix
        for family in text_string_to_metric_families(text)
        for suffix in SUFFIXES.get(family.type, ("",))
    }


@pytest.mark.timeout(240)
async def test_every_metric_the_dashboard_queries_is_served(tmp_path: Path) -> None:
    queried = queried_metrics()
    assert queried >= SHOWN
    state = tmp_path / "state"
    # a daily budget, so the budget-left gauge is served (without one it is absent: unknown)
    env = daemon_env(
        state, VIGIL_SIM__SPEED="600", VIGIL_AGENT__DAILY_BUDGET_USD="5", **LIGHT_MARKET
    )
    async with sim_daemon(env, tmp_path / "daemon.log") as proc:
        url, token = await wait_for_api(state, proc)
        auth = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=auth) as http:
            async with asyncio.timeout(120):
                while True:  # the market connects after the API: wait for a decision
                    async with http.get(url + "/metrics") as r:
                        assert r.status == 200
                        text = await r.text()
                    if re.search(r"^vigil_decisions_total\{.*\} [1-9]", text, re.M):
                        break
                    await asyncio.sleep(0.5)
        assert await stop(proc) == 0
    missing = sorted(queried - served_series(text))
    assert not missing, f"the dashboard queries metrics /metrics does not serve: {missing}"
