"""The session tier's writes: the directory made when missing, names normalised once."""

from __future__ import annotations

import shutil
from pathlib import Path

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.clock import VirtualClock
from memory.session_store import SessionStore, normalise_name, session_key

T0 = 1_740_787_200_000


@pytest.mark.parametrize("durable", [True, False])
def test_a_set_makes_the_directory_again_when_it_was_removed(tmp_path: Path, durable: bool) -> None:
    directory = tmp_path / "state" / "sessions"
    store = SessionStore(directory, VirtualClock(epoch_ms=T0), durable=durable)
    key = session_key("BTC/USDT", "decision")
    store.set(key, {"action": "BUY"})
    shutil.rmtree(tmp_path / "state")
    store.set(key, {"action": "SELL"})
    (written,) = directory.glob("*.json")
    assert orjson.loads(written.read_bytes())["value"] == {"action": "SELL"}
    restarted = SessionStore(directory, VirtualClock(epoch_ms=T0))
    assert restarted.get(key) == {"action": "SELL"}


def test_a_hand_edit_between_two_sets_is_replaced_by_the_second(tmp_path: Path) -> None:
    store = SessionStore(tmp_path, VirtualClock(epoch_ms=T0), durable=False)
    key = session_key("ETH/USDT", "analysis", "thesis")
    store.set(key, "a long first thesis, longer than the second")
    (path,) = tmp_path.glob("*.json")
    path.write_bytes(b'{"edited": true, "padding": "' + b"x" * 200 + b'"}')
    entry = store.set(key, "second")
    assert orjson.loads(path.read_bytes()) == entry.model_dump(mode="json")


def _normalised_again(name: str) -> str:
    return normalise_name.__wrapped__(name)


@given(st.lists(st.one_of(st.text(max_size=8), st.sampled_from(["BTCUSDT", "btc/usdt"]))))
def test_remembered_names_are_those_normalised_again(names: list[str]) -> None:
    for name in names * 2:
        try:
            expected = _normalised_again(name)
        except ValueError:
            with pytest.raises(ValueError):
                normalise_name(name)
            continue
        assert normalise_name(name) == expected
