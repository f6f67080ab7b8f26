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
