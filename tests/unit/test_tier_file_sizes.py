"""A rule or an organisation file far larger than a rule or a policy is (a sparse file, a log saved
under the wrong name): refused with its size, never read whole into the daemon's memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from memory.tiers import TIER_FILE_MAX_BYTES, OrganisationTier, ProjectTier, TierError

BIG = 64 << 20  # past the bound; a sparse file, so it costs no disk


def _sparse(path: Path, head: bytes) -> None:
    with path.open("wb") as fh:
        fh.write(head)
        fh.truncate(BIG)


def test_a_rule_file_over_the_bound_skips_the_project_tier_saying_why(tmp_path: Path) -> None:
    """Read whole before: a sparse 2 GB rule was 2 GB of NUL bytes in memory, and in the rules."""
    tier = ProjectTier(tmp_path)
    tier.rules_dir.mkdir()
    (tier.rules_dir / "sol.md").write_text('---\ntickers: ["SOL/*"]\n---\nhalf size\n')
    _sparse(tier.rules_dir / "huge.md", b"keep calm\n")
    with pytest.raises(TierError, match=f"over the {TIER_FILE_MAX_BYTES:,}"):
        tier.rules()
    (tier.rules_dir / "huge.md").unlink()
    assert [r.name for r in tier.rules()] == ["sol"]


@pytest.mark.parametrize("name", ["rubric.md", "policy.toml"])
def test_an_organisation_file_over_the_bound_is_a_tier_error(tmp_path: Path, name: str) -> None:
    org = tmp_path / "org"
    org.mkdir()
    (org / "caps.toml").write_text("max_position_pct = 0.1\n")
    _sparse(org / name, b"# rubric\n" if name.endswith(".md") else b"text = 'x'\n")
    with pytest.raises(TierError, match=f"over the {TIER_FILE_MAX_BYTES:,}"):
        OrganisationTier(org).load()
