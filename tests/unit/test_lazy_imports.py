"""Heavy optional libraries load only when used (issue 18): ccxt (~4 s of imports) with an exchange
client or the ccxt broker, anthropic with a Claude client. Each check runs in a fresh interpreter
(this test process has imported everything already) with the work tree first on sys.path.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_fresh(code: str) -> str:
    """Run ``code`` in a new interpreter at the repo root; its stdout (it must exit 0)."""
    done = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip()


def test_the_daemon_and_replay_compositions_import_neither_ccxt_nor_anthropic() -> None:
    loaded = run_fresh(
        "import sys\n"
        "import runner.commands, runner.app, runner.replay.build, runner.replay.command\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'ccxt', 'anthropic'}))\n"
    )
    assert loaded == "[]"


def test_a_recorded_exchange_refusal_maps_to_a_rejection_when_ccxt_was_not_loaded() -> None:
    """The recorded exchange imports ccxt only to raise its error; ``call_with_retries`` resolves
    ccxt's error classes after the raise, so the refusal is still a ``CcxtRequestRejectedError``
    (not retried, not an unknown exception) in an interpreter that never built a ccxt client."""
    out = run_fresh(
        "import asyncio, sys\n"
        "from core.clock import VirtualClock\n"
        "from market.ccxt_client import CcxtRequestRejectedError, RetryPolicy, call_with_retries\n"
        "from sim.feed import SimFeed\n"
        "from sim.inprocess import RecordedOhlcvExchange\n"
        "assert 'ccxt' not in sys.modules\n"
        "clock = VirtualClock(epoch_ms=1_740_787_200_000)\n"
        "exchange = RecordedOhlcvExchange(SimFeed(('BTC/USDT',)), clock)\n"
        "policy = RetryPolicy(max_attempts=3)\n"
        "call = lambda: exchange.fetch_ohlcv('DOGE/USDT:USDT', '4h')\n"
        "try:\n"
        "    asyncio.run(call_with_retries(clock, call, what='ohlcv', policy=policy))\n"
        "except CcxtRequestRejectedError as exc:\n"
        "    print(type(exc.__cause__).__name__, 'ccxt' in sys.modules)\n"
    )
    assert out == "BadSymbol True"


def test_the_health_check_and_the_parser_load_no_pandas_numpy_or_http_client(
    tmp_path: Path,
) -> None:
    """Docker runs ``vigil health`` every 30 s for as long as the daemon runs: building the parser
    and the settings imported pandas, numpy and aiohttp (2.0-2.3 s of CPU a check, about 7 % of a
    core for ever; 0.7 s without them). ``vigil --help`` builds the same parser."""
    state = tmp_path / "state"
    state.mkdir()
    loaded = run_fresh(
        "import contextlib, io, sys\n"
        "from runner.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    code = main(['--state-dir', {str(state)!r}, 'health'])\n"
        "heavy = {'pandas', 'numpy', 'aiohttp', 'ccxt', 'anthropic', 'fastapi', 'sklearn'}\n"
        "print(code, sorted({m.split('.')[0] for m in sys.modules} & heavy))\n"
    )
    assert loaded == "1 []"  # unhealthy: no daemon has written a heartbeat there
