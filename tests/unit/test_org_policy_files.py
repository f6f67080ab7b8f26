"""An organisation folder with more than one ``.toml`` (a desk's file beside the team's
``policy.toml``): each file can only tighten, never undo, what another says."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.org_caps import OrganisationCaps
from agent.risk import RiskConfig
from memory.tiers import OrganisationTier, TierError


def test_a_later_file_neither_loosens_a_cap_nor_unbans_a_ticker(tmp_path: Path) -> None:
    """The files' keys were merged in name order, the last one winning: ``b.toml`` saying 0.5
    replaced ``a.toml``'s 0.05, a ban in one was lifted by the other's list, and only the last
    file's text reached the prompt."""
    (tmp_path / "a_policy.toml").write_text(
        'max_position_pct = 0.05\nbanned_tickers = ["DOGE/USDT"]\ntext = "No memecoins."\n'
    )
    (tmp_path / "b_desk.toml").write_text(
        'max_position_pct = 0.5\nmax_total_exposure_pct = 1.5\nbanned_tickers = ["PEPE/USDT"]\n'
        'text = "Weekend caution."\n'
    )
    policy = OrganisationTier(tmp_path).load()
    assert policy is not None
    assert (policy.max_position_pct, policy.max_total_exposure_pct) == (0.05, 1.5)
    assert policy.banned_tickers == ("DOGE/USDT", "PEPE/USDT")
    assert policy.text == "No memecoins.\n\nWeekend caution."
    caps = OrganisationCaps(OrganisationTier(tmp_path), RiskConfig())
    assert caps.config().max_position_pct == 0.05
    assert caps.whitelist(["BTC/USDT", "DOGE/USDT", "PEPE/USDT"]) == ("BTC/USDT",)


def test_a_broken_file_among_several_is_a_tier_error_naming_it(tmp_path: Path) -> None:
    (tmp_path / "a_policy.toml").write_text("max_position_pct = 0.05\n")
    (tmp_path / "b_desk.toml").write_text('max_position_pct = "half"\n')
    with pytest.raises(TierError, match="max_position_pct"):
        OrganisationTier(tmp_path).load()


@pytest.mark.parametrize("name", ["policy.TOML", "policy.txt", "policy"])
def test_one_file_neither_toml_nor_md_is_a_tier_error(tmp_path: Path, name: str) -> None:
    """Anything but ``.toml`` was read as a rubric: a policy saved as ``policy.TOML`` or
    ``policy.txt`` loaded without error, its caps and bans as text in the prompt, none applied."""
    path = tmp_path / name
    path.write_text('max_position_pct = 0.05\nbanned_tickers = ["DOGE/USDT"]\n')
    with pytest.raises(TierError, match=r"neither a \.toml policy nor a \.md rubric"):
        OrganisationTier(path).load()
