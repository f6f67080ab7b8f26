"""``vigil replay`` with the fallback decider never imports ccxt or anthropic (issue 18: lazy
imports): replay's exchange is the in-process recording and nobody asks Claude. Nor scikit-learn or
SciPy (issue 18: resident memory): its regime fits run in the fit pool's processes
(``regime.fit_pool``) and predict needs neither (``regime.hmm_predict``). Nor FastAPI: a replay
serves no operator's API (importing it took about 1.3 s of every replay's start). A day of one ticker
is replayed through the CLI in a fresh interpreter (this test process has imported both already),
and the interpreter's modules are read after the run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

REPLAY_THEN_LIST = """
import sys
from runner.cli import main
code = main(sys.argv[1:])
heavy = {'ccxt', 'anthropic', 'sklearn', 'scipy', 'fastapi', 'starlette', 'uvicorn'}
print(code, sorted({name.split('.')[0] for name in sys.modules} & heavy))
"""


def test_a_fallback_replay_loads_no_exchange_client_model_sdk_scikit_learn_or_web_framework(
    tmp_path: Path,
) -> None:
    config = tmp_path / "vigil.toml"
    config.write_text("# empty: the defaults\n")
    env = {"PATH": "/usr/bin:/bin", "VIGIL_CONFIG_FILE": str(config), "HOME": str(tmp_path)}
    args = ["replay", "--from", "2025-03-02", "--to", "2025-03-02", "--tickers", "BTC/USDT"]
    done = subprocess.run(
        [sys.executable, "-c", REPLAY_THEN_LIST, *args, "--out", str(tmp_path / "run")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().splitlines()[-1] == "0 []"
    assert (tmp_path / "run" / "logs" / "decisions.jsonl").stat().st_size > 0
