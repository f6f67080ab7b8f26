"""models/online_learner.json: atomic saves, round trip, and refusing a file it cannot trust."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.errors import RefuseToStartError
from learner.model_file import LEARNER_FILE_MAX_BYTES, SCHEMA_VERSION
from learner.online import OnlineLearner


def teach(learner: OnlineLearner) -> None:
    learner.update({"rsi": 0.6, "momentum": -0.4}, 5.0, "bull", "BTC/USDT", 1, 60.0)
    learner.update({"rsi": 0.3, "momentum": -0.7}, -2.0, "bull", "ETH/USDT", 2, 120.0)
    learner.update({"rsi": 0.0, "bollinger": -0.2}, 10.0, "bull", "SOL/USDT", 3, 180.0)
    learner.update({"derivatives": 0.9}, -1.5, "bear", "BTC/USDT", 4, 240.0)
    learner.update({"rsi": 0.2}, 3.0, None, "BTC/USDT", 5, 300.0)


def everything(learner: OnlineLearner) -> tuple[object, ...]:
    return (
        learner.posteriors(None),
        learner.posteriors("bull"),
        learner.posteriors("bear"),
        learner.recent_trades(),
        learner.regime_counts,
        learner.sample_weights("bull", random.Random(11)),
    )


def test_round_trip_restores_the_learner_exactly(tmp_path: Path) -> None:
    path = tmp_path / "models" / "online_learner.json"
    learner = OnlineLearner(path)
    teach(learner)
    assert not learner.unsaved
    saved = json.loads(path.read_text())
    assert saved["schema_version"] == SCHEMA_VERSION
    assert saved["regime_counts"] == {"bull": 3, "bear": 1}
    assert len(saved["recent_trades"]) == 5

    reloaded = OnlineLearner(path)
    assert everything(reloaded) == everything(learner)
    # and it keeps learning from where it was
    learner.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 6, 1.0)
    reloaded.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 6, 1.0)
    assert everything(reloaded) == everything(learner)


def test_every_update_is_saved(tmp_path: Path) -> None:
    path = tmp_path / "online_learner.json"
    learner = OnlineLearner(path)
    assert not path.exists()  # constructing reads; only learning writes
    learner.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 1, 1.0)
    assert OnlineLearner(path).regime_counts == {"bull": 1}
    learner.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 2, 1.0)
    assert OnlineLearner(path).regime_counts == {"bull": 2}


def test_a_smaller_window_keeps_the_newest_saved_trades(tmp_path: Path) -> None:
    path = tmp_path / "online_learner.json"
    learner = OnlineLearner(path)
    for i in range(10):
        learner.update({"rsi": 0.5}, 1.0, None, "BTC/USDT", i, 1.0)
    assert [t["at_ms"] for t in OnlineLearner(path, window=4).recent_trades()] == [6, 7, 8, 9]


def test_stale_temporary_file_is_removed_at_load(tmp_path: Path) -> None:
    path = tmp_path / "online_learner.json"
    OnlineLearner(path).update({"rsi": 0.5}, 1.0, None, "BTC/USDT", 1, 1.0)
    stale = tmp_path / ".online_learner.json.0123456789abcdef.tmp"
    stale.write_text("half a file")
    OnlineLearner(path)
    assert not stale.exists()
    assert path.exists()


def valid_file() -> dict[str, object]:
    return {
        "schema_version": 1,
        "global_posteriors": {"rsi": {"alpha": 1.2, "beta": 0.9, "trades": 2}},
        "regime_posteriors": {},
        "regime_counts": {},
        "recent_trades": [],
    }


def broken(change: dict[str, object]) -> bytes:
    return json.dumps(valid_file() | change).encode()


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (b"{not json", "not valid JSON"),
        (b"", "not valid JSON"),
        (b"\xff\xfe", "not UTF-8"),
        (b"[1, 2]", "expected one JSON object"),
        (broken({"schema_version": 99}), "newer"),
        (broken({"schema_version": "1"}), "schema_version"),
        (broken({"global_posteriors": {"rsi": {"alpha": -1, "beta": 1, "trades": 0}}}), "alpha"),
        (broken({"global_posteriors": {"rsi": {"alpha": 1, "beta": 1}}}), "trades"),
        (
            b'{"schema_version": 1, "global_posteriors": {"rsi": {"alpha": NaN, "beta": 1, "trades": 0}}}',
            "NaN",
        ),
        (broken({"surprise": 1}), "surprise"),
        (broken({"regime_counts": {"bull": -2}}), "regime_counts"),
        # json's own limits: a ValueError and a RecursionError, not JSONDecodeErrors
        (b'{"schema_version": ' + b"1" * 5000 + b"}", "a number is too long to read (5,000 digits"),
        (b"[" * 100_000, "arrays or objects are nested too deeply to read"),
    ],
)
def test_invalid_file_is_refused_and_left_untouched(
    tmp_path: Path, data: bytes, problem: str
) -> None:
    path = tmp_path / "online_learner.json"
    path.write_bytes(data)
    with pytest.raises(RefuseToStartError) as refused:
        OnlineLearner(path)
    assert str(path) in str(refused.value)
    assert problem in str(refused.value)
    assert path.read_bytes() == data


@pytest.mark.parametrize("field", ["alpha", "beta"])
def test_a_posterior_too_large_to_draw_from_is_refused(tmp_path: Path, field: str) -> None:
    # finite and positive, but random.betavariate loops forever on it (2 * alpha overflows):
    # the first decision's draw would have blocked the event loop for good
    path = tmp_path / "online_learner.json"
    data = broken(
        {"global_posteriors": {"rsi": {"alpha": 1, "beta": 1, "trades": 0, field: 1e308}}}
    )
    path.write_bytes(data)
    with pytest.raises(RefuseToStartError, match=f"global_posteriors.rsi.{field}"):
        OnlineLearner(path)
    assert path.read_bytes() == data


@settings(max_examples=examples(50), deadline=None)
@given(
    alpha=st.floats(min_value=5e-324, max_value=1e308),
    beta=st.floats(min_value=5e-324, max_value=1e308),
)
def test_any_posterior_the_file_may_hold_can_be_drawn_from(
    tmp_path_factory: pytest.TempPathFactory, alpha: float, beta: float
) -> None:
    path = tmp_path_factory.mktemp("learner") / "online_learner.json"
    path.write_text(json.dumps(valid_file() | {"global_posteriors": {"rsi": {
        "alpha": alpha, "beta": beta, "trades": 1}}}))  # fmt: skip
    try:
        learner = OnlineLearner(path)
    except RefuseToStartError:
        return
    assert 0.0 <= learner.draw(None, random.Random(1))["rsi"] <= 1.0


def test_a_fifo_in_place_of_the_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    # read_bytes blocked in open() until someone wrote to it: the start hung for good
    path = tmp_path / "online_learner.json"
    os.mkfifo(path)
    got = outcome_beside_fifo(lambda: OnlineLearner(path), path)
    assert isinstance(got, RefuseToStartError)
    assert str(path) in str(got) and "not a regular file" in str(got)


def test_a_file_far_larger_than_a_model_is_refused_unread(tmp_path: Path) -> None:
    # a model is kilobytes; a damaged file of gigabytes was read whole at start
    path = tmp_path / "online_learner.json"
    with path.open("wb") as sparse:
        sparse.truncate(LEARNER_FILE_MAX_BYTES + 1)
    with pytest.raises(RefuseToStartError, match="bytes, over the"):
        OnlineLearner(path)
    assert path.stat().st_size == LEARNER_FILE_MAX_BYTES + 1


def test_valid_hand_written_file_loads(tmp_path: Path) -> None:
    path = tmp_path / "online_learner.json"
    path.write_text(json.dumps(valid_file()))
    rsi = OnlineLearner(path).posteriors(None)["signals"]["rsi"]
    assert rsi == {"alpha": 1.2, "beta": 0.9, "mean": pytest.approx(1.2 / 2.1), "trades": 2}


def test_failed_save_is_logged_and_learning_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    learner = OnlineLearner(tmp_path / "models" / "online_learner.json")
    # a file where the models directory should go: every save now fails
    (tmp_path / "models").write_text("not a directory")
    learner.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 1, 1.0)
    assert learner.unsaved
    assert "could not save" in caplog.text
    assert learner.regime_counts == {"bull": 1}
    with pytest.raises(OSError):
        learner.save()
    # once the directory is usable again, the next update saves everything learned so far
    (tmp_path / "models").unlink()
    learner.update({"rsi": 0.5}, 1.0, "bull", "BTC/USDT", 2, 1.0)
    saved_now = not learner.unsaved  # a fresh name: mypy still narrows the property to True
    assert saved_now
    assert OnlineLearner(tmp_path / "models" / "online_learner.json").regime_counts == {"bull": 2}


def test_unusable_location_is_refused(tmp_path: Path) -> None:
    (tmp_path / "models").write_text("not a directory")
    path = tmp_path / "models" / "online_learner.json"
    with pytest.raises(RefuseToStartError, match=r"online_learner\.json"):
        OnlineLearner(path)


@settings(max_examples=examples(20), deadline=None)
@given(
    trades=st.lists(
        st.tuples(
            st.dictionaries(
                st.sampled_from(["rsi", "momentum", "bollinger", "derivatives"]),
                st.floats(-1, 1, allow_nan=False),
            ),
            st.floats(-80, 80, allow_nan=False),
            st.sampled_from([None, "bull", "bear", "high_volatility_stagflation"]),
        ),
        max_size=8,
    )
)
def test_any_history_survives_a_restart(
    tmp_path_factory: pytest.TempPathFactory,
    trades: list[tuple[dict[str, float], float, str | None]],
) -> None:
    path = tmp_path_factory.mktemp("learner") / "online_learner.json"
    learner = OnlineLearner(path)
    for i, (signals, pnl_pct, regime) in enumerate(trades):
        learner.update(signals, pnl_pct, regime, "BTC/USDT", i, 1.0)
    if not trades:
        assert not path.exists()
        return
    assert everything(OnlineLearner(path)) == everything(learner)
