"""A stray bar far from the simulated instant (a 2099 row in a data dir) costs ``vigil prompt``
and ``vigil sim`` nothing: their feed keeps the look-back before their start and, for the
simulator, the bars reached from its start without a hole of more than
``sim.feed.LONGEST_SERVED_HOLE_MS``. Before, the feed's dense arrays spanned every year up to the
stray bar (about a gigabyte a ticker). Peak resident size is measured in a fresh interpreter
(it depends on what is held, not on the machine's speed)."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
from fakes.daemon import REPO, daemon_env
from replay_support import day_start_ms

from market.recorded import kline_path, load_klines

STRAY_MS = day_start_ms("2099-06-01")
PEAK_MIB = 400  # 165 MiB; the stray bar's feed took 1,151 MiB

_PROMPT = """
import json, resource, sys
from runner.cli import main
code = main(["prompt"])
print(json.dumps({"code": code, "peak_kib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def _data_dir(root: Path) -> Path:
    """The bundled BTC 5m bars of 2025-02-26 .. 03-03 and a 2099 bar."""
    five = load_klines("BTC/USDT", "5m")
    five = five[
        (five.index >= day_start_ms("2025-02-26")) & (five.index < day_start_ms("2025-03-04"))
    ]
    frame = pd.concat([five, five.iloc[[-1]].set_axis([STRAY_MS])])
    path = kline_path("BTC/USDT", "5m", root)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as out:
        frame.to_csv(out, index_label="open_time_ms", float_format="%.10g")
    return root


def _env(tmp_path: Path) -> dict[str, str]:
    return daemon_env(
        tmp_path / "state",
        VIGIL_DATA_DIR=str(_data_dir(tmp_path / "data")),
        VIGIL_MARKET__TICKERS='["BTC/USDT"]',
        VIGIL_SIM__START="2025-03-02T00:00:00Z",
    )


def test_vigil_prompt_with_a_far_future_bar_keeps_its_look_back_only(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _PROMPT],
        env=_env(tmp_path),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    *request, outcome = done.stdout.strip().splitlines()
    result = json.loads(outcome)
    assert result["code"] == 0
    assert "BTC/USDT" in json.loads("\n".join(request))["messages"][0]["content"][0]["text"]
    assert result["peak_kib"] < PEAK_MIB * 1024, f"peak {result['peak_kib'] // 1024} MiB"
