"""The organisation's policy tightens the risk caps at every decision, never loosens them, bans
tickers, and a broken edit of the shared policy keeps the last good one in force."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.decision import AgentDecision, TradeDecision
from agent.org_caps import OrganisationCaps
from agent.risk import RiskConfig, RiskContext, apply_risk_caps
from broker.port import Action
from memory.tiers import OrganisationTier, TierError

TICKERS = ("BTC/USDT", "ETH/USDT", "SOL/USDT")


def _caps(folder: Path, policy: str, base: RiskConfig | None = None) -> OrganisationCaps:
    folder.mkdir(exist_ok=True)
    (folder / "policy.toml").write_text(policy)
    return OrganisationCaps(OrganisationTier(folder), base or RiskConfig())


def _buy_all(pct: float) -> AgentDecision:
    return AgentDecision(
        decisions=tuple(
            TradeDecision(ticker=t, action=Action.BUY, position_pct=pct) for t in TICKERS
        ),
        decided_by="fallback",
    )


def _context(caps: OrganisationCaps) -> RiskContext:
    return RiskContext(
        whitelist=caps.whitelist(TICKERS),
        portfolio_value_usd=10_000.0,
        cash_usd=10_000.0,
        prices={"BTC/USDT": 90_000.0, "ETH/USDT": 3_000.0, "SOL/USDT": 150.0},
    )


def test_the_organisations_caps_and_bans_bind_the_orders(tmp_path: Path) -> None:
    caps = _caps(tmp_path / "org", 'max_position_pct = 0.05\nbanned_tickers = ["SOL/USDT"]\n')
    outcome = apply_risk_caps(_buy_all(0.20), _context(caps), caps.config(), "d1")
    assert {i.ticker: round(i.notional_usd) for i in outcome.intents} == {
        "BTC/USDT": 500,
        "ETH/USDT": 500,
    }
    assert any(c.ticker == "SOL/USDT" for c in outcome.changes)


def test_a_looser_policy_never_loosens_this_instance(tmp_path: Path) -> None:
    base = RiskConfig(max_position_pct=0.10, max_total_exposure_pct=0.5)
    caps = _caps(tmp_path / "org", "max_position_pct = 0.9\nmax_total_exposure_pct = 2.0\n", base)
    config = caps.config()
    assert (config.max_position_pct, config.max_total_exposure_pct) == (0.10, 0.5)


@pytest.mark.parametrize(
    "broken",
    [
        "max_position_pct = [not toml",
        # tomllib's own limits, a plain ValueError and a RecursionError: each failed every decision
        "max_position_pct = " + "1" * 5000,
        "x = " + "[" * 100_000,
    ],
)
def test_a_broken_edit_keeps_the_last_good_policy(tmp_path: Path, broken: str) -> None:
    folder = tmp_path / "org"
    caps = _caps(folder, "max_position_pct = 0.05\n")
    assert caps.config().max_position_pct == 0.05
    (folder / "policy.toml").write_text(broken)
    assert caps.config().max_position_pct == 0.05  # not the instance's looser 0.20


def test_no_policy_configured_leaves_the_instance_caps(tmp_path: Path) -> None:
    caps = OrganisationCaps(OrganisationTier(None), RiskConfig())
    assert caps.config() == RiskConfig() and caps.whitelist(TICKERS) == TICKERS


def test_a_policy_saved_with_a_byte_order_mark_binds_as_it_reads(tmp_path: Path) -> None:
    """Read as config and grid files are (``state.toml_file``); tomllib alone refused the mark as
    an "invalid statement", so the organisation's caps silently did not apply."""
    folder = tmp_path / "org"
    folder.mkdir()
    (folder / "policy.toml").write_bytes("\ufeffmax_position_pct = 0.05\n".encode())
    assert (
        OrganisationCaps(OrganisationTier(folder), RiskConfig()).config().max_position_pct == 0.05
    )


@pytest.mark.parametrize(
    ("content", "reason"),
    [
        (b"max_position_pct = 0.05 # \xff\n", "is not UTF-8 text: byte 0xff at offset 26"),
        (b"max_position_pct = " + b"1" * 5000, "holds a number too long"),
        (b"x = " + b"[" * 100_000, "nested too deeply"),
    ],
)
def test_an_unreadable_policy_says_why(tmp_path: Path, content: bytes, reason: str) -> None:
    folder = tmp_path / "org"
    folder.mkdir()
    (folder / "policy.toml").write_bytes(content)
    with pytest.raises(TierError, match=reason):
        OrganisationTier(folder).load()


@pytest.mark.parametrize(
    ("written", "banned"),
    [("SOL/USDT", "SOL/USDT"), ("sol/usdt", "SOL/USDT"), ("SOLUSDT", "SOL/USDT")],
)
def test_a_banned_ticker_is_read_as_the_caps_compare_it(
    tmp_path: Path, written: str, banned: str
) -> None:
    caps = _caps(tmp_path / "org", f'banned_tickers = ["{written}"]\n')
    assert banned not in caps.whitelist(TICKERS)
    policy = caps.policy()
    assert policy is not None and policy.banned_tickers == (banned,)  # the prompt says so too


@pytest.mark.parametrize("written", ["SOL", "SOL/*", "SOL\u200b/USDT", "", "SOL/USDT/X"])
def test_a_banned_name_that_is_no_ticker_keeps_the_last_good_policy(
    tmp_path: Path, written: str
) -> None:
    """``SOL`` banned nothing, silently, while the prompt told the model SOL was banned."""
    caps = _caps(tmp_path / "org", 'banned_tickers = ["ETH/USDT"]\n')
    assert "ETH/USDT" not in caps.whitelist(TICKERS)
    (tmp_path / "org" / "policy.toml").write_text(f'banned_tickers = ["{written}"]\n')
    with pytest.raises(TierError, match="is not a ticker: write it as BASE/QUOTE"):
        OrganisationTier(tmp_path / "org").load()
    assert caps.whitelist(TICKERS) == ("BTC/USDT", "SOL/USDT")  # ETH still banned


def test_a_policy_file_gone_from_the_folder_keeps_the_last_good_policy(tmp_path: Path) -> None:
    """An editor's backup step (``policy.toml`` moved to ``policy.toml~``) dropped every cap and
    ban without a word; the folder itself gone kept them already."""
    folder = tmp_path / "org"
    caps = _caps(folder, 'max_position_pct = 0.05\nbanned_tickers = ["SOL/USDT"]\n')
    assert caps.config().max_position_pct == 0.05
    (folder / "policy.toml").rename(folder / "policy.toml~")
    (folder / "rubric.md").write_text("Score by risk-adjusted return.\n")
    assert caps.config().max_position_pct == 0.05
    assert "SOL/USDT" not in caps.whitelist(TICKERS)
    (folder / "policy.toml").write_text("# no caps: lifted on purpose\n")
    assert caps.config().max_position_pct == RiskConfig().max_position_pct
    assert "SOL/USDT" in caps.whitelist(TICKERS)


def test_a_folder_without_a_policy_from_the_start_is_a_rubric_only(tmp_path: Path) -> None:
    folder = tmp_path / "org"
    folder.mkdir()
    (folder / "rubric.md").write_text("Score by risk-adjusted return.\n")
    policy = OrganisationTier(folder).load()
    assert policy is not None and policy.rubric.startswith("Score") and not policy.banned_tickers
