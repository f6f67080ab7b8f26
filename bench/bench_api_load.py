"""The operator's API under load while the daemon trades: ``python -m bench api_load``.

A real ``vigil run --sim`` (child process, simulator at 60x, fallback decider, API on a free
loopback port; ``--isolation inline`` puts the API on the daemon's loop instead of its own
process, the default). In one run, three phases of ``--phase-secs`` each (default: one
simulated 4h period, 240 s at 60x, so that each phase holds one 4h close: that decision waits for
three REST refreshes of the 4h history and is the slowest of the period; phases of another length
hold zero or one, and their means differ by it, load or not):

1. quiet: no API client but this bench's two scrapes of ``/metrics`` at the phase's ends;
2. load: ``--clients`` (50) concurrent clients, each requesting in a loop a mix of ``/api/status``,
   ``/api/positions``, ``/api/decisions?limit=50``, ``/api/trades``, ``/api/equity``,
   ``/metrics`` and ``/healthz``; every request's latency is measured on the client; a 503 (the
   API's admission control) is counted apart from the errors, and its ``Retry-After`` honoured;
3. quiet again (so a drift of the daemon's pace over the run does not pass for the load's cost);
4. control: the same clients against ``vigil serve`` on a copy of the daemon's state dir (another
   process; ``/metrics`` left out, it needs a daemon): the machine is as loaded, but the daemon is
   not asked at all. What phase 2 costs beyond phase 4 is what the daemon answers itself (all of
   it inline; the live figures, coalesced, with an API process); what phase 4 costs beyond the
   quiet phases is the machine's cores.

The daemon's decision latency per phase comes from its own histogram
(``vigil_decision_latency_seconds``, real seconds from a decision's start to its journal line): the
difference of two scrapes gives the phase's count, exact mean, and p50 / p95 interpolated inside
the histogram's buckets (as Prometheus's ``histogram_quantile``). The load average is read at each
phase's start and end. ``--api-cpus 1`` puts the API process (``[api] process_cpus``) and the
clients on CPU 1, as if the clients ran on other machines and the host kept a core for the daemon. The clients run in this process, the daemon in another: both share the
machine's cores, which is what a dashboard and a scraper on the daemon's host do.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from bench.api_load_procs import REPO, daemon_env, serve_copy, terminate, wait_for_api

PATHS = (
    "/api/status",
    "/api/positions",
    "/api/decisions?limit=50",
    "/api/trades?limit=50",
    "/api/equity?max_points=200",
    "/metrics",
    "/healthz",
)
HISTOGRAM = "vigil_decision_latency_seconds"
FOUR_HOURS_SECS = 4 * 3600


@dataclass
class Histogram:
    buckets: dict[float, float] = field(default_factory=dict)  # le -> cumulative count
    total_secs: float = 0.0
    count: float = 0.0

    def minus(self, before: Histogram) -> Histogram:
        return Histogram(
            {le: n - before.buckets.get(le, 0.0) for le, n in self.buckets.items()},
            self.total_secs - before.total_secs,
            self.count - before.count,
        )

    def quantile(self, q: float) -> float | None:
        """Linear inside the bucket, as ``histogram_quantile``; None without observations."""
        if self.count <= 0:
            return None
        rank, lower, below = q * self.count, 0.0, 0.0
        for le in sorted(self.buckets):
            cumulative = self.buckets[le]
            if cumulative >= rank:
                if le == float("inf"):
                    return lower
                width = cumulative - below
                return lower + (le - lower) * ((rank - below) / width if width else 1.0)
            lower, below = le, cumulative
        return lower


def parse_histogram(text: str) -> Histogram:
    hist = Histogram()
    for family in text_string_to_metric_families(text):
        if family.name != HISTOGRAM:
            continue
        for sample in family.samples:  # summed over the decided_by label
            if sample.name.endswith("_bucket"):
                le = float(sample.labels["le"])
                hist.buckets[le] = hist.buckets.get(le, 0.0) + sample.value
            elif sample.name.endswith("_sum"):
                hist.total_secs += sample.value
            elif sample.name.endswith("_count"):
                hist.count += sample.value
    return hist


@dataclass
class Phase:
    name: str
    decisions: Histogram
    load_before: tuple[float, float, float]
    load_after: tuple[float, float, float]
    wall_secs: float
    requests: dict[str, list[float]] = field(default_factory=dict)  # path -> latencies (s)
    errors: dict[str, int] = field(default_factory=dict)
    busy: dict[str, int] = field(default_factory=dict)  # 429/503 + Retry-After (ceiling, admission)


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def scrape(http: aiohttp.ClientSession, url: str) -> Histogram:
    async with http.get(url + "/metrics") as r:
        r.raise_for_status()
        return parse_histogram(await r.text())


async def client(
    http: aiohttp.ClientSession,
    url: str,
    n: int,
    until: float,
    phase: Phase,
    paths: tuple[str, ...] = PATHS,
) -> None:
    i = n  # each client starts at a different path of the mix
    while time.monotonic() < until:
        path = paths[i % len(paths)]
        i += 1
        started = time.perf_counter()
        retry_after = None
        try:
            async with http.get(url + path) as r:
                await r.read()
                ok = r.status == 200
                if r.status in (429, 503) and "Retry-After" in r.headers:
                    retry_after = float(r.headers["Retry-After"])
        except aiohttp.ClientError as exc:
            ok, path = False, f"{path} ({type(exc).__name__})"
        if retry_after is not None:  # told to come back later: a polite client does
            phase.busy[path] = phase.busy.get(path, 0) + 1
            await asyncio.sleep(retry_after)
        elif ok:
            phase.requests.setdefault(path, []).append(time.perf_counter() - started)
        else:
            phase.errors[path] = phase.errors.get(path, 0) + 1


async def run_phase(
    http: aiohttp.ClientSession,
    url: str,
    name: str,
    secs: float,
    clients: int,
    target: tuple[aiohttp.ClientSession, str, tuple[str, ...]] | None = None,
) -> Phase:
    """Decisions scraped from the daemon at ``url``; the clients load ``target`` (default it)."""
    load_before = os.getloadavg()
    before = await scrape(http, url)
    started = time.monotonic()
    phase = Phase(name, Histogram(), load_before, load_before, 0.0)
    if clients:
        until = started + secs
        session, base, paths = target or (http, url, PATHS)
        await asyncio.gather(
            *(client(session, base, n, until, phase, paths) for n in range(clients))
        )
    else:
        await asyncio.sleep(secs)
    phase.wall_secs = time.monotonic() - started
    phase.decisions = (await scrape(http, url)).minus(before)
    phase.load_after = os.getloadavg()
    return phase


LIVE_PATHS = frozenset({"/api/status", "/api/positions", "/metrics"})


async def wait_for_decisions(http: aiohttp.ClientSession, url: str, at_least: int) -> None:
    async with asyncio.timeout(300):
        while True:  # polls another process's counter: no event to wait on
            if (await scrape(http, url)).count >= at_least:
                return
            await asyncio.sleep(1.0)


async def measure(args: argparse.Namespace, work: Path) -> list[Phase]:
    state = work / "state"
    state.mkdir()
    with (work / "daemon.log").open("wb") as log:
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "runner.cli", "run", "--sim",
            env=daemon_env(state, args.speed, args.isolation, args.max_rps, args.api_cpus),
            cwd=REPO, stdout=log, stderr=log,
        )  # fmt: skip
    try:
        url, token = await wait_for_api(state, proc)
        if args.clients_nice:
            os.nice(args.clients_nice)  # this process only: the daemon was started before
        if args.api_cpus:
            os.sched_setaffinity(0, args.api_cpus)  # likewise
        connector = aiohttp.TCPConnector(limit=args.clients + 4)
        headers = {"Authorization": f"Bearer {token}"}
        async with aiohttp.ClientSession(headers=headers, connector=connector) as http:
            await wait_for_decisions(http, url, 3)  # warmed up: the market is flowing
            phases = []
            mix = tuple(p for p in PATHS if not (args.files_only and p in LIVE_PATHS))
            for name, clients in (("quiet", 0), ("load", args.clients), ("quiet again", 0)):
                print(f"phase {name}: {args.phase_secs:g} s ...", flush=True)
                phases.append(
                    await run_phase(http, url, name, args.phase_secs, clients, (http, url, mix))
                )
            if args.control:
                print(f"phase control: {args.phase_secs:g} s ...", flush=True)
                async with (
                    serve_copy(state, work) as (serve_url, serve_token),
                    aiohttp.ClientSession(
                        headers={"Authorization": f"Bearer {serve_token}"},
                        connector=aiohttp.TCPConnector(limit=args.clients + 4),
                    ) as serve_http,
                ):
                    paths = tuple(p for p in PATHS if p != "/metrics")
                    target = (serve_http, serve_url, paths)
                    phases.append(
                        await run_phase(http, url, "control", args.phase_secs, args.clients, target)
                    )
        return phases
    finally:
        await terminate(proc)


def report(phases: list[Phase], args: argparse.Namespace) -> None:
    cpus = os.cpu_count()
    print(
        f"daemon: vigil run --sim at {args.speed:g}x, fallback decider, API isolation "
        f"{args.isolation!r}, max_requests_per_sec "
        f"{'default' if args.max_rps is None else f'{args.max_rps:g}'}; clients at niceness "
        f"+{args.clients_nice}; {cpus} CPUs; API process and clients on CPUs "
        f"{','.join(map(str, args.api_cpus)) or 'any'}; phases of {args.phase_secs:g} s"
    )
    for p in phases:
        d = p.decisions
        mean = d.total_secs / d.count * 1000 if d.count else None
        print(
            f"  {p.name:<12} {p.wall_secs:5.1f} s  load avg {p.load_before[0]:.2f} -> "
            f"{p.load_after[0]:.2f}  decisions {d.count:.0f}  latency mean "
            + ("n/a" if mean is None else f"{mean:.1f} ms")
            + f"  p50 {_ms(d.quantile(0.5))}  p95 {_ms(d.quantile(0.95))}"
        )
    load = phases[1]
    for loaded in phases[1:2] + phases[3:]:
        every = [lat for lats in loaded.requests.values() for lat in lats]
        if every:
            print(
                f"API ({loaded.name}) under {args.clients} clients: {len(every):,} requests "
                f"({len(every) / loaded.wall_secs:,.0f}/s), errors "
                f"{sum(loaded.errors.values())}, busy (429/503) {sum(loaded.busy.values())}, "
                f"p50 {pct(every, 0.5) * 1000:.1f} ms, "
                f"p95 {pct(every, 0.95) * 1000:.1f} ms, p99 {pct(every, 0.99) * 1000:.1f} ms"
            )
    by_path: dict[str, list[float]] = defaultdict(list, load.requests)
    for path in sorted(by_path):
        lats = by_path[path]
        print(
            f"  {path:<28} n {len(lats):6,}  p50 {pct(lats, 0.5) * 1000:7.1f} ms  "
            f"p95 {pct(lats, 0.95) * 1000:7.1f} ms  mean {statistics.fmean(lats) * 1000:7.1f} ms"
        )
    for path, n in sorted(load.errors.items()):
        print(f"  error {path}: {n}")
    for path, n in sorted(load.busy.items()):
        print(f"  busy (429/503, Retry-After honoured) {path}: {n}")
    quiet = phases[0].decisions.total_secs + phases[2].decisions.total_secs
    quiet_n = phases[0].decisions.count + phases[2].decisions.count
    if quiet_n and load.decisions.count:
        q_mean, l_mean = quiet / quiet_n, load.decisions.total_secs / load.decisions.count
        change = (l_mean / q_mean - 1) * 100
        print(
            f"decision latency mean: quiet {q_mean * 1000:.1f} ms ({quiet_n:.0f} decisions), "
            f"under load {l_mean * 1000:.1f} ms ({load.decisions.count:.0f}): {change:+.1f} % "
            f"({'within' if change <= 10 else 'over'} the issue's 10 %)"
        )
        if len(phases) > 3 and phases[3].decisions.count:
            c = phases[3].decisions
            c_mean = c.total_secs / c.count
            print(
                f"control (the same load on a vigil serve process): decision latency mean "
                f"{c_mean * 1000:.1f} ms ({c.count:.0f}): {(c_mean / q_mean - 1) * 100:+.1f} %"
            )
    else:
        print("decision latency change: unavailable (a phase had no decision: longer phases)")


def cpu_list(text: str) -> tuple[int, ...]:
    """``--api-cpus 0,1`` as a tuple (argparse reports a bad one as a usage error)."""
    return tuple(int(cpu) for cpu in text.split(",") if cpu.strip())


def _ms(secs: float | None) -> str:
    return "n/a" if secs is None else f"{secs * 1000:.1f} ms"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench api_load")
    parser.add_argument("--clients", type=int, default=50)
    parser.add_argument(
        "--phase-secs",
        type=float,
        default=None,
        help="each phase's length (default: one simulated 4h period at --speed, so every phase "
        "holds one 4h close and its slow decision, which waits for three REST refreshes)",
    )
    parser.add_argument("--speed", type=float, default=60.0)
    parser.add_argument(
        "--api-cpus",
        type=cpu_list,
        default=(),
        help="comma-separated CPUs for the API process ([api] process_cpus) and this bench's "
        "clients, as if the clients were on other machines: the daemon keeps the other cores",
    )
    parser.add_argument(
        "--isolation",
        choices=("process", "inline"),
        default="process",
        help="[api] isolation of the daemon: its own process (default) or the daemon's loop",
    )
    parser.add_argument(
        "--max-rps",
        type=float,
        default=None,
        help="[api] max_requests_per_sec of the daemon (default: its default; 0: no ceiling)",
    )
    parser.add_argument(
        "--clients-nice",
        type=int,
        default=0,
        help="run this bench's clients at this niceness (the daemon keeps its own): clients on "
        "other machines take none of the daemon's cores",
    )
    parser.add_argument(
        "--no-control",
        dest="control",
        action="store_false",
        help="skip the control phase (the load on a vigil serve process instead)",
    )
    parser.add_argument(
        "--files-only",
        action="store_true",
        help="leave out the routes that ask the daemon (status, positions, metrics): what the "
        "load costs the daemon without a single request reaching it",
    )
    args = parser.parse_args(argv or [])
    if args.phase_secs is None:
        args.phase_secs = FOUR_HOURS_SECS / args.speed
    with tempfile.TemporaryDirectory(prefix="vigil-api-load-") as tmp:
        phases = asyncio.run(measure(args, Path(tmp)))
    report(phases, args)


if __name__ == "__main__":
    main(sys.argv[1:])
