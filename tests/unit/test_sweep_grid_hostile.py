"""``vigil sweep GRID.toml`` on hostile grids and folders: each is refused before a cluster starts,
naming the file and the field, never a traceback, a hang, an empty sweep or a run counted twice."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak
from fakes.fifo import outcome_beside_fifo

import runner.sweep.engine
from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from market.recorded import default_data_dir
from runner.cli import main
from runner.config import Settings
from runner.sweep.grid import check_runs, expand, load_grid

BASE = 'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT"]]\n'


def write(tmp_path: Path, data: bytes | str) -> Path:
    path = tmp_path / "grid.toml"
    path.write_bytes(data.encode() if isinstance(data, str) else data)
    return path


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (BASE + "memory = []", "memory: Tuple should have at least 1 item"),
        (BASE + "seeds = []", "seeds: Tuple should have at least 1 item"),
        (BASE + "deciders = []", "deciders: Tuple should have at least 1 item"),
        (BASE + "overrides = {}", "overrides: Dictionary should have at least 1 item"),
        ('periods = [["2025-03-01", "2025-03-01"]]\ntickers = [[]]', "tickers.0: Tuple should"),
        (BASE + 'memory = ["yes"]', "memory.0: Input should be a valid boolean"),
        (BASE + "seeds = [true]", "seeds.0: Input should be a valid integer"),
        (BASE + "seeds = [-1]", "seeds.0: Input should be greater than or equal to 0"),
        (BASE + "seeds = [4294967296]", "seeds.0: Input should be less than or equal"),
        (BASE + "seeds = [7, 7]", "seeds lists 7 more than once"),
        (BASE + 'deciders = ["fallback", "fallback"]', "deciders lists 'fallback' more than"),
        (BASE + "memory = [true, true]", "memory lists True more than once"),
        (
            'periods = [["2025-03-01", "2025-03-01"]]\ntickers = [["BTC/USDT", "BTC/USDT"]]',
            "ticker set lists 'BTC/USDT' more than once",
        ),
        ('periods = [["9999-12-31", "9999-12-31"]]\ntickers = [["BTC/USDT"]]', "outside 2010"),
        (BASE + "update_secs = nan", "update_secs nan must divide 300"),
        (BASE + "update_secs = inf", "update_secs inf must divide 300"),
        (BASE + "update_secs = 7", "update_secs 7 must divide 300"),
        (BASE + "update_secs = 0.0015", "update_secs 0.0015 is under 1 s"),
        (BASE + "update_secs = true", "update_secs: Input should be a valid number"),
        (BASE + 'update_secs = "75"', "update_secs: Input should be a valid number"),
        (BASE + 'data_dir = ""', "data_dir: an empty path (write '.' for the working directory)"),
        (BASE + f"seeds = [{', '.join(map(str, range(10_001)))}]", "20,002 runs; at most 10,000"),
        (BASE + "seeds = [" + "9" * 4301 + "]", "4301 digits"),
        (BASE + "x = " + "[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_a_bad_grid_is_refused_naming_the_field(tmp_path: Path, text: str, said: str) -> None:
    path = write(tmp_path, text)
    with pytest.raises(RefuseToStartError, match=f"grid file {path}") as caught:
        load_grid(path)
    assert said in str(caught.value)


def test_a_grid_that_is_not_utf8_or_has_a_bom(tmp_path: Path) -> None:
    with pytest.raises(RefuseToStartError, match="not UTF-8 text: byte 0xff at offset 59"):
        load_grid(write(tmp_path, BASE.encode().replace(b"C/U", b"C/U\xff")))
    assert load_grid(write(tmp_path, "\ufeff" + BASE)).tickers == (("BTC/USDT",),)


def test_a_directory_or_fifo_grid_is_refused_without_reading_it(tmp_path: Path) -> None:
    (tmp_path / "dir.toml").mkdir()
    with pytest.raises(RefuseToStartError, match="not a regular file"):
        load_grid(tmp_path / "dir.toml")
    fifo = tmp_path / "fifo.toml"
    os.mkfifo(fifo)
    caught = outcome_beside_fifo(lambda: load_grid(fifo), fifo)
    assert isinstance(caught, RefuseToStartError) and "not a regular file" in str(caught)


def test_a_huge_grid_is_refused_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A sparse file of gigabytes was read whole, then decoded whole, before TOML refused it."""
    grid = tmp_path / "grid.toml"
    with grid.open("wb") as handle:
        handle.truncate(256 << 20)
    with allocation_peak() as allocated:
        code = main(["sweep", str(grid), "--out", str(tmp_path / "out")])
    assert code == EXIT_REFUSE_TO_START
    assert "over the 1,048,576 read" in capsys.readouterr().err
    assert allocated.peak_bytes < 16 << 20 and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ('tickers = [["DOGE/USDT"]]', "DOGE/USDT: not configured"),
        ('deciders = ["claude"]', "needs ANTHROPIC_API_KEY"),
        ('data_dir = "/nonexistent/vigil-data"', "data dir /nonexistent/vigil-data does not exist"),
        (
            'periods = [["2015-03-01", "2015-03-01"]]',
            "period 2015-03-01 .. 2015-03-01: BTC/USDT's recording in",
        ),
        ('data_dir = "{empty}"', "recorded data: no base klines (1m, 3m, 5m or 15m) for BTC/USDT"),
        ('data_dir = "{malformed}"', "recorded data: {malformed}/binance-usdm/BTCUSDT-5m.csv.gz"),
        # optional, but malformed: it passed here and failed every run on the cluster
        ('data_dir = "{funding}"', "malformed recorded data: {funding}/binance-usdm/BTCUSDT-fun"),
        ('data_dir = "{fng}"', "malformed recorded data: {fng}/alternative-me/fear-greed-daily"),
    ],
)
def test_what_would_fail_every_run_is_refused_before_the_cluster(
    tmp_path: Path, extra: str, said: str
) -> None:
    folders = {name: tmp_path / name for name in ("empty", "malformed", "funding", "fng")}
    folders["empty"].mkdir()
    (folders["malformed"] / "binance-usdm").mkdir(parents=True)
    (folders["malformed"] / "binance-usdm" / "BTCUSDT-5m.csv.gz").write_bytes(b"not gzip")
    bars = default_data_dir() / "binance-usdm" / "BTCUSDT-5m.csv.gz"
    for name in ("funding", "fng"):
        (folders[name] / "binance-usdm").mkdir(parents=True)
        (folders[name] / "binance-usdm" / bars.name).symlink_to(bars)
    (folders["funding"] / "binance-usdm" / "BTCUSDT-funding.csv.gz").write_bytes(b"not gzip")
    (folders["fng"] / "alternative-me").mkdir()
    (folders["fng"] / "alternative-me" / "fear-greed-daily.csv").write_text("timestamp_s,value\n")
    extra, said = extra.format_map(folders), said.format_map(folders)
    text = BASE
    for line in ("periods", "tickers"):
        if extra.startswith(line):
            text = "\n".join(t for t in text.splitlines() if not t.startswith(line)) + "\n"
    grid = load_grid(write(tmp_path, text + extra))
    base = Settings() if grid.data_dir is None else Settings(data_dir=grid.data_dir)
    specs = expand(grid, {"base": base}, default_data_dir())
    with pytest.raises(RefuseToStartError, match=re.escape(said)):
        check_runs(specs, {"base": base}, tmp_path / "runs")


def test_an_out_that_is_a_file_is_refused_and_kept(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    out.write_text("mine\n")
    grid = write(tmp_path, BASE + "memory = [true]\n")
    assert main(["sweep", str(grid), "--out", str(out)]) == 78
    err = capsys.readouterr().err
    assert f"--out {out}: cannot make" in err and "Traceback" not in err
    assert out.read_text() == "mine\n"


@pytest.mark.timeout(300)  # unfixed, the report's case ran its replay before the traceback
@pytest.mark.parametrize("name", ["sweep.json", "experiment.json", "experiment.html"])
def test_a_folder_in_place_of_a_file_the_sweep_writes_is_refused_before_any_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str
) -> None:
    out = tmp_path / "out"
    (out / name).mkdir(parents=True)
    grid = write(tmp_path, BASE + "memory = [true]\n")
    assert main(["sweep", str(grid), "--out", str(out)]) == 78
    err = capsys.readouterr().err
    assert f"{out / name} is a folder" in err and "Traceback" not in err
    assert not (out / "runs").exists()


@pytest.mark.parametrize("workers", ["-1", "0", "two"])
def test_a_local_cluster_of_no_workers_is_a_usage_error(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    workers: str,
) -> None:
    """-1 workers made a LocalCluster that never ran a task: the sweep waited forever."""
    started: list[object] = []  # a sweep that got past the arguments (no cluster is started here)

    def run_sweep(*args: object, **kwargs: object) -> int:
        started.append(args)
        return 0

    monkeypatch.setattr(runner.sweep.engine, "run_sweep", run_sweep)
    grid = write(tmp_path, BASE + "memory = [true]\n")
    with pytest.raises(SystemExit) as stopped:
        main(["sweep", str(grid), "--out", str(tmp_path / "out"), f"--workers={workers}"])
    assert stopped.value.code == 2
    assert "--workers" in capsys.readouterr().err
    assert not (tmp_path / "out").exists() and started == []
