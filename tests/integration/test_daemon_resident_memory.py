"""The sim daemon's own process stays light (issue #18): its regime fits run in a child process
(``regime.fit_pool``), its embedder hashes n-grams itself (``memory.char_hash``) and ccxt loads
binanceusdm alone (``market.ccxt_slim``), so scikit-learn, SciPy and ccxt's other exchanges never
enter it. Checked in a fresh interpreter: pytest's own process has imported all of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from fakes.daemon import REPO, daemon_env

_SCRIPT = """
import asyncio, json, sys
from runner.app import build_daemon
from runner.warm_paths import warm_up_paths
from runner.config import MarketConfig, Settings

async def main(state_dir):
    settings = Settings(state_dir=state_dir, market=MarketConfig(source="sim"))
    daemon = await build_daemon(settings)
    try:
        await warm_up_paths(settings, daemon.clock, daemon.market, daemon.decision)
        regimes = {t: daemon.decision.regimes.crypto(t).label.value for t in settings.market.tickers}
        memory = daemon.decision.memory
        assert memory is not None and memory.embedder is not None
        await memory.embedder.embed(["stop loss hit after RSI 71"])
    finally:
        await daemon.market.exchange.close()
        await daemon.sim.stop()
    exchanges = [m for m in sys.modules if m.startswith("ccxt.async_support.")
                 and m.count(".") == 2 and m.rsplit(".", 1)[1] not in ("base",)]
    print(json.dumps({
        "regimes": regimes,
        "sklearn": any(m == "sklearn" or m.startswith("sklearn.") for m in sys.modules),
        "scipy": any(m == "scipy" or m.startswith("scipy.") for m in sys.modules),
        "hmmlearn_hmm": "hmmlearn.hmm" in sys.modules,
        "exchanges": sorted(exchanges),
    }))

if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
"""


def test_the_sim_daemon_fits_its_regimes_without_importing_scikit_learn(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(tmp_path / "state")],
        # an empty fit cache of its own: the fits must run (in the child) for the check to mean it
        env=daemon_env(tmp_path / "state", VIGIL_REGIME__FIT_CACHE_DIR=str(tmp_path / "fits")),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert set(found["regimes"]) == {"BTC/USDT", "ETH/USDT", "SOL/USDT"}
    assert "unknown" not in found["regimes"].values()  # fitted (in the child) and predicted here
    assert found["sklearn"] is False
    assert found["scipy"] is False
    assert found["hmmlearn_hmm"] is False
    assert set(found["exchanges"]) <= {
        "ccxt.async_support.binance",
        "ccxt.async_support.binanceusdm",
    }, found["exchanges"]
    assert "ccxt.async_support.binanceusdm" in found["exchanges"]
