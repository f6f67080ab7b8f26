"""An editor's files beside a rule or a policy file (Emacs locks a file it edits with a dangling
symlink ``.#name``): not rules, not policy, and no reason to leave a tier out."""

from __future__ import annotations

from pathlib import Path

from memory.tiers import OrganisationTier, ProjectTier


def test_an_editors_lock_beside_a_rule_is_not_read(tmp_path: Path) -> None:
    """``.#sol.md`` ended in ``.md``, so it was listed as a rule; its stat failed, and the whole
    project tier (MEMORY.md too) was left out of every decision while the rule was being edited."""
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_text("# MEMORY\nweekends are thin\n")
    tier.rules_dir.mkdir()
    (tier.rules_dir / "sol.md").write_text('---\ntickers: ["SOL/*"]\n---\nhalf size\n')
    (tier.rules_dir / ".#sol.md").symlink_to("me@host.4242:1700000000")
    (tier.rules_dir / ".sol.md").write_text("an editor's copy\n")
    assert [rule.name for rule in tier.rules()] == ["sol"]
    assert tier.notes() == "# MEMORY\nweekends are thin"


def test_an_editors_lock_beside_the_policy_is_not_read(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text("max_position_pct = 0.05\n")
    (tmp_path / ".#policy.toml").symlink_to("me@host.4242:1700000000")
    (tmp_path / ".#rubric.md").symlink_to("me@host.4242:1700000000")
    policy = OrganisationTier(tmp_path).load()
    assert policy is not None and policy.max_position_pct == 0.05
