"""The ``vigil`` command line: its parser and what each command runs (``runner.cli`` is the entry).

Exit codes: 0 fine, 1 unhealthy (``vigil health``), 2 usage error, 78 refused to start (bad config,
unusable state dir, state from a newer version).
"""

from __future__ import annotations

import argparse
import asyncio
import errno
import json
import os
import sys
import time
from collections.abc import Sequence
from functools import cache
from typing import Any

from core.errors import EXIT_REFUSE_TO_START, EXIT_UNHEALTHY, EXIT_USAGE, RefuseToStartError
from runner.cli_text import halt_reason, path_argument, port_number, seconds_limit
from runner.config import STATE_DIR, Settings, load_settings
from runner.data.parser import add_data_parser
from runner.memory_parser import add_memory_parser
from runner.replay.parser import add_replay_parser
from runner.state_dir_check import require_state_dir
from runner.sweep.command import add_sweep_parser, run_sweep_command
from state.line_text import terminal_safe_lines


@cache  # ~25 ms to build (argparse looks a translation up per argument); parsing leaves it as it was
def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vigil", description="Event-driven crypto trading daemon."
    )
    parser.add_argument(
        "--config", type=path_argument, help="TOML config file (default ./vigil.toml)"
    )
    parser.add_argument(
        "--state-dir",
        type=path_argument,
        help=f"state dir (env VIGIL_STATE_DIR, default ./{STATE_DIR})",
    )
    parser.add_argument(
        "--log-format", choices=("text", "json"), help="log lines as text or JSON (config [log])"
    )
    sub = parser.add_subparsers(dest="command")
    _add_daemon_commands(sub)
    _add_operator_commands(sub)
    add_memory_parser(sub)
    _add_inspect_commands(sub)
    add_replay_parser(sub)
    _add_trading_commands(sub)
    add_data_parser(sub)
    add_sweep_parser(sub)
    config = sub.add_parser("config", help="configuration")
    config_sub = config.add_subparsers(dest="config_command", required=True)
    config_sub.add_parser("show", help="print the effective config, secrets redacted")
    return parser


def _add_daemon_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``run`` and the standalone ``sim``."""
    run = sub.add_parser("run", help="run the daemon (the default command)")
    run.add_argument("--sim", action="store_true", help="market data from the built-in simulator")
    run.add_argument("--speed", type=float, help="simulator speed factor (with --sim)")
    run.add_argument("--start", help="simulated start instant, ISO 8601 UTC (with --sim)")
    run.add_argument(
        "--broker", choices=("paper", "ccxt"), help="paper (default) or ccxt (Binance demo/live)"
    )
    run.add_argument(
        "--live",
        action="store_true",
        help="trade real money (needs --broker ccxt and VIGIL_LIVE_CONFIRM=yes)",
    )

    sim = sub.add_parser("sim", help="run the Binance simulator standalone")
    sim.add_argument("--port", type=port_number, default=8765, help="websocket port (default 8765)")
    sim.add_argument("--rest-port", type=port_number, help="REST port (default: --port + 1)")
    sim.add_argument("--speed", type=float, help="speed factor (default [sim] speed, 60)")
    sim.add_argument("--start", help="simulated start instant, ISO 8601 UTC")
    sim.add_argument("--update-interval-ms", type=int, help="kline cadence (default 250)")


def _add_operator_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """What an operator runs beside the daemon: ``health``, ``status``, ``serve``."""
    about = (
        "exit 0 if the daemon is healthy (a fresh heartbeat, market data, a journal it can write, "
        "trading not halted), else 1 with one line per problem"
    )
    health = sub.add_parser("health", help=about, description=about)
    health.add_argument(
        "--stale-secs", type=seconds_limit, help="override supervisor.heartbeat_stale_secs"
    )

    status = sub.add_parser(
        "status",
        help="one screen: equity, positions, PnL today, trading, breaker, budget, health "
        "(from the daemon's API when it serves, else the state dir; exit 1 when unhealthy)",
    )
    status.add_argument("--json", action="store_true", help="the same figures as one JSON object")

    serve = sub.add_parser(
        "serve", help="the operator's HTTP API on a state dir without a daemon (config: [api])"
    )
    serve.add_argument("--host", help="address to listen on (default 127.0.0.1)")
    serve.add_argument("--port", type=port_number, help="port (default 8780; 0: any free port)")


def _add_inspect_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """``prompt`` and ``report``: read a state dir, change nothing."""
    prompt = sub.add_parser(
        "prompt",
        help="print exactly what would be sent to Claude for the latest snapshot (JSON)",
    )
    prompt.add_argument(
        "--parts",
        action="store_true",
        help="print the prompt's parts with their sizes, the tiers loaded and what was trimmed",
    )
    prompt.add_argument(
        "--role",
        choices=("bull", "bear", "trader", "manager", "reflection"),
        help='what this debate role would be sent (agent.decider = "debate")',
    )

    report = sub.add_parser(
        "report", help="write report.json and report.html for a run's state dir (or compare two)"
    )
    report.add_argument(
        "run_dir", nargs="?", type=path_argument, help="a state dir (default: the configured)"
    )
    report.add_argument("--out", type=path_argument, help="where to write (default: the run dir)")
    report.add_argument(
        "--compare", nargs=2, type=path_argument, metavar=("RUN_A", "RUN_B"), help="side by side"
    )


def _add_trading_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    trading = sub.add_parser(
        "trading", help="halt or resume trading (a running daemon picks it up from the state dir)"
    )
    trading_sub = trading.add_subparsers(dest="trading_command", required=True)
    trading_sub.add_parser("status", help="print the trading state (exit 1 when halted)")
    halt = trading_sub.add_parser("halt", help="stop new entries; exits and stops still run")
    halt.add_argument(
        "--reason", required=True, type=halt_reason, help="why, for the journal and the status line"
    )
    trading_sub.add_parser("resume", help="allow new entries again")


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    if args.state_dir is not None:
        overrides["state_dir"] = args.state_dir
    if getattr(args, "log_format", None) is not None:
        overrides["log"] = {"format": args.log_format}
    sim: dict[str, Any] = {}
    if getattr(args, "speed", None) is not None:
        sim["speed"] = args.speed
    if getattr(args, "start", None) is not None:
        sim["start"] = args.start
    if getattr(args, "update_interval_ms", None) is not None:
        sim["update_interval_ms"] = args.update_interval_ms
    if sim:
        overrides["sim"] = sim
    if getattr(args, "sim", False):
        overrides["market"] = {"source": "sim"}
    if args.command == "serve":
        api = {"host": args.host, "port": args.port}
        api = {k: v for k, v in api.items() if v is not None}
        if api:
            overrides["api"] = api
    if getattr(args, "broker", None) is not None:
        overrides["broker"] = {"kind": args.broker}
    if getattr(args, "data_dir", None) is not None:
        overrides["data_dir"] = args.data_dir
    return overrides


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.config is not None:
        os.environ["VIGIL_CONFIG_FILE"] = str(args.config)
    try:
        settings = load_settings(_overrides(args))
        return _dispatch(args, settings)
    except RefuseToStartError as exc:
        # the reason may quote a peer (an exchange's error body): escaped, not sent to the terminal
        print(f"vigil: refusing to start: {terminal_safe_lines(str(exc))}", file=sys.stderr)
        return EXIT_REFUSE_TO_START
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno != errno.ENAMETOOLONG:
            raise
        # a path typed (or configured) with a name past the file system's 255 bytes: pathlib's
        # exists() and is_dir() raise it rather than answer, a traceback from a dozen commands
        name = terminal_safe_lines(str(exc.filename))
        print(
            f"vigil: {name}: a name in this path is too long for the file system", file=sys.stderr
        )
        return EXIT_USAGE


def _dispatch(args: argparse.Namespace, settings: Settings) -> int:
    command = args.command or "run"
    require_state_dir(command, settings, getattr(args, "memory_command", None))
    if command == "config":
        print(json.dumps(settings.redacted(), indent=2, sort_keys=True))
        return 0
    if command == "health":
        return _health(settings, args.stale_secs)
    if command == "status":
        from runner.status_cmd import status_command

        return status_command(settings, as_json=args.json)
    if command == "report":
        return _report(args, settings)
    if command == "trading":
        from runner.trading_cmd import trading_command

        return trading_command(settings.runner_state_path, args.trading_command, args)
    if command == "replay":
        return _replay(args, settings)
    if command == "prompt":
        from runner.prompt_cmd import render_prompt

        print(render_prompt(settings, parts=args.parts, role=args.role))
        return 0
    if command == "sim":
        return _sim(args, settings)
    if command == "memory":
        from runner.memory_cmd import run_memory

        return run_memory(args, settings)
    if command == "data":
        from runner.data.command import run_data

        return run_data(args)
    if command == "sweep":
        return run_sweep_command(args, _overrides(args))
    if command == "serve":
        from runner.serve_cmd import serve

        return asyncio.run(serve(settings))
    misplaced = _simulator_flag(args, settings)
    if misplaced is not None:
        print(
            f'vigil run: {misplaced} is the simulator\'s: add --sim (or set market.source = "sim")',
            file=sys.stderr,
        )
        return EXIT_USAGE
    return _run(settings, live=getattr(args, "live", False))


def _simulator_flag(args: argparse.Namespace, settings: Settings) -> str | None:
    """A ``run`` option only the simulator reads, given for live market data: the daemon took
    it silently and traded Binance's data in real time (``--sim`` forgotten)."""
    if settings.market.source == "sim":
        return None
    given = [flag for flag in ("speed", "start") if getattr(args, flag, None) is not None]
    return f"--{given[0]}" if given else None


def _run(settings: Settings, *, live: bool) -> int:
    import logging

    from runner.app import EXIT_STUCK, run_daemon

    runner = asyncio.Runner()
    try:
        exit_code: int = runner.run(run_daemon(settings, live=live))
    except BaseException:
        runner.close()
        raise
    if exit_code == EXIT_STUCK:
        # a loop swallowed its cancellation: journals are flushed and state saved, but closing the
        # event loop would wait for that loop forever
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(exit_code)
    runner.close()
    return exit_code


def _report(args: argparse.Namespace, settings: Settings) -> int:
    from report.compare import compare_runs
    from report.figures import RunFolderError
    from report.html import ReportNotWrittenError, write_report

    try:
        if args.compare:
            print(compare_runs(*args.compare))
            return 0
        run_dir = args.run_dir or settings.state_dir
        report = write_report(run_dir, args.out)
    except RunFolderError as exc:
        print(f"vigil report: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except ReportNotWrittenError as exc:
        print(f"vigil report: {terminal_safe_lines(str(exc))}", file=sys.stderr)
        return EXIT_REFUSE_TO_START
    out = args.out or run_dir
    decided = sum(d.decisions for d in report.deciders)
    print(f"wrote {out / 'report.json'} and {out / 'report.html'} ({decided} decisions)")
    return 0


def _replay(args: argparse.Namespace, settings: Settings) -> int:
    if args.compare:
        return _report(args, settings)
    from runner.replay.args import options_from_args
    from runner.replay.build import replay_settings
    from runner.replay.command import replay_main

    try:
        options = options_from_args(args, settings.market.tickers)
    except ValueError as exc:
        print(f"vigil replay: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return replay_main(replay_settings(settings, options), options, verbose=args.verbose)


def _health(settings: Settings, stale_secs: float | None) -> int:
    from runner.heartbeat import check_health

    limit = stale_secs if stale_secs is not None else settings.supervisor.heartbeat_stale_secs
    status = check_health(
        settings.heartbeat_path,
        limit,
        time.time(),
        market_stale_secs=settings.supervisor.market_stale_secs,
    )
    if status.healthy:
        print("healthy: " + status.reason)
        return 0
    for reason in status.reasons or (status.reason,):
        print("unhealthy: " + reason)
    return EXIT_UNHEALTHY


def _sim(args: argparse.Namespace, settings: Settings) -> int:
    from runner.logging_setup import configure_logging
    from runner.stop_signals import until_stop_signal
    from runner.warmup import look_back_window
    from sim.exchange import run_standalone

    configure_logging(settings.log_level, settings.secret_values(), config=settings.log)
    rest_port = args.rest_port if args.rest_port is not None else args.port + 1
    if rest_port > 65535:
        print(
            f"vigil sim: --port {args.port} leaves no REST port; give --rest-port", file=sys.stderr
        )
        return EXIT_USAGE
    start_ms = settings.sim.start_ms
    standalone = run_standalone(
        host=settings.sim.host,
        ws_port=args.port,
        rest_port=rest_port,
        start_ms=start_ms,
        speed=settings.sim.speed,
        tickers=settings.market.tickers,
        update_interval_ms=settings.sim.update_interval_ms,
        data_dir=settings.data_dir,
        # a client daemon's warm-up look-back, as ``vigil run --sim`` keeps
        first_ms=look_back_window(settings.market.history_days, start_ms, start_ms)[0],
    )
    asyncio.run(until_stop_signal(standalone))  # docker stop, Ctrl-C, a closed terminal: exit 0
    return 0
