"""Live-mode guard, API keys, exchange URLs and the write-ahead journal's crash handling.

(Pure logic, kept beside the CcxtBroker's integration tests it belongs to; nothing connects.)
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.ccxt_broker import build_exchange
from broker.ccxt_rest import binance_code
from broker.live_guard import ApiKeys, check_live, load_api_keys
from broker.order_journal import JournalIntent, OrderJournal
from broker.port import OrderResult
from core.errors import RefuseToStartError

KEYS = ApiKeys.model_validate({"api_key": "k" * 64, "api_secret": "s" * 64})


@pytest.mark.parametrize(
    ("flag", "env", "mode"),
    [
        (False, {}, "testnet"),
        (False, {"VIGIL_LIVE_CONFIRM": "yes"}, "testnet"),  # the setting alone is not enough
        (True, {"VIGIL_LIVE_CONFIRM": "yes"}, "live"),
    ],
)
def test_live_needs_both_the_flag_and_the_confirmation(
    flag: bool, env: dict[str, str], mode: str
) -> None:
    assert check_live(flag, env) == mode


@pytest.mark.parametrize("confirm", [None, "", "no", "YES!", "true"])
def test_the_flag_without_confirmation_refuses_to_start(confirm: str | None) -> None:
    env = {} if confirm is None else {"VIGIL_LIVE_CONFIRM": confirm}
    with pytest.raises(RefuseToStartError, match="VIGIL_LIVE_CONFIRM=yes"):
        check_live(True, env)


def test_keys_from_env_or_files_and_never_shown(tmp_path: Path) -> None:
    secret_file = tmp_path / "secret"
    secret_file.write_text("file-secret\n")
    keys = load_api_keys(
        {"BINANCE_API_KEY": "env-key", "BINANCE_API_SECRET_FILE": str(secret_file)}
    )
    assert keys.api_key.get_secret_value() == "env-key"
    assert keys.api_secret.get_secret_value() == "file-secret"
    assert "env-key" not in repr(keys) and "file-secret" not in str(keys)
    with pytest.raises(RefuseToStartError, match="BINANCE_API_SECRET"):
        load_api_keys({"BINANCE_API_KEY": "env-key"})


@pytest.mark.parametrize(
    ("mode", "host"), [("testnet", "demo-fapi.binance.com"), ("live", "fapi.binance.com")]
)
async def test_exchange_urls_by_mode(mode: str, host: str) -> None:
    exchange = build_exchange(mode, KEYS)  # type: ignore[arg-type]
    try:
        assert exchange.urls["api"]["fapiPrivate"] == f"https://{host}/fapi/v1"
        assert exchange.apiKey == "k" * 64
    finally:
        await exchange.close()


def test_binance_code_is_read_from_the_ccxt_message() -> None:
    err = Exception('binanceusdm {"code":-2019,"msg":"Margin is insufficient."}')
    assert binance_code(err) == -2019
    assert binance_code(Exception("connection reset")) is None


def _intent(cid: str) -> JournalIntent:
    return JournalIntent(
        client_order_id=cid,
        decision_id="d",
        ticker="BTC/USDT",
        side="buy",
        requested_notional_usd=100.0,
        at_ms=5,
    )


def test_journal_survives_restart_and_a_torn_last_line(tmp_path: Path) -> None:
    path = tmp_path / "orders.jsonl"
    journal = OrderJournal(path)
    journal.load()
    journal.record_intent(_intent("a"))
    journal.record_intent(_intent("b"))
    done = OrderResult(
        client_order_id="a",
        ticker="BTC/USDT",
        side="buy",
        status="cancelled",
        requested_notional_usd=100.0,
    )
    journal.record_final(done)
    with path.open("ab") as handle:
        handle.write(b'{"kind":"intent","client_ord')  # a crash mid-append
    resumed = OrderJournal(path)
    resumed.load()
    assert resumed.get("a") is not None and resumed.get("a").final == done  # type: ignore[union-attr]
    assert [e.intent.client_order_id for e in resumed.pending()] == ["b"]
    assert path.read_bytes().endswith(b"\n")  # the torn tail was cut off


def test_journal_damaged_in_the_middle_refuses_to_start(tmp_path: Path) -> None:
    path = tmp_path / "orders.jsonl"
    journal = OrderJournal(path)
    journal.load()
    journal.record_intent(_intent("a"))
    path.write_bytes(b"garbage\n" + path.read_bytes())
    with pytest.raises(RefuseToStartError, match="line 1"):
        OrderJournal(path).load()


@pytest.mark.parametrize("line", [b"[]", b'["intent"]', b"null", b"5", b'"intent"', b"{}"])
def test_a_journal_line_that_is_no_json_object_is_a_damaged_line(
    tmp_path: Path, line: bytes
) -> None:
    path = tmp_path / "orders.jsonl"
    journal = OrderJournal(path)
    journal.load()
    journal.record_intent(_intent("a"))
    good = path.read_bytes()
    path.write_bytes(line + b"\n" + good)
    with pytest.raises(RefuseToStartError, match="line 1 is damaged"):
        OrderJournal(path).load()
    path.write_bytes(good + line + b"\n")  # last: a torn line, dropped
    resumed = OrderJournal(path)
    resumed.load()
    assert [e.intent.client_order_id for e in resumed.pending()] == ["a"]
    assert path.read_bytes() == good
