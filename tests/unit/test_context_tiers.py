"""Organisation / project / session tiers and the ContextAssembler that merges them."""

from __future__ import annotations

import re
import tempfile
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.clock import VirtualClock
from memory.context import ContextAssembler, InsightItem, merge_values
from memory.session_store import SessionStore, normalise_name, session_key
from memory.tiers import (
    AUTO_ENTRIES_KEPT,
    MEMORY_READ_LINES,
    OrganisationPolicy,
    OrganisationTier,
    ProjectTier,
    TierError,
    parse_rule,
    tighten,
)

T0 = 1_740_787_200_000


def test_merge_order_non_empty_overrides() -> None:
    merged = merge_values(
        {"rubric": "org", "notes": "org notes"},
        {"rubric": "", "notes": "project"},
        {"notes": "session"},
    )
    assert merged == {"rubric": "org", "notes": "session"}


def test_organisation_caps_only_tighten(tmp_path: Path) -> None:
    (tmp_path / "policy.toml").write_text(
        'max_position_pct = 0.1\nmax_total_exposure_pct = 2.5\nbanned_tickers = ["DOGE/USDT"]\ntext = "No leverage."\n'
    )
    (tmp_path / "rubric.md").write_text("Score: clear reason, named signals.")
    policy = OrganisationTier(tmp_path).load()
    assert policy is not None and policy.banned_tickers == ("DOGE/USDT",)
    assert policy.rubric.startswith("Score") and policy.text == "No leverage."
    caps = tighten({"max_position_pct": 0.2, "max_total_exposure_pct": 1.0}, policy)
    assert caps == {"max_position_pct": 0.1, "max_total_exposure_pct": 1.0}  # 2.5 never loosens
    assert tighten({"max_position_pct": 0.2}, OrganisationPolicy()) == {"max_position_pct": 0.2}


def test_organisation_cached_until_a_file_changes(tmp_path: Path) -> None:
    path = tmp_path / "policy.toml"
    path.write_text("max_position_pct = 0.1\n")
    tier = OrganisationTier(path)
    first = tier.load()
    assert tier.load() is first
    path.write_text("max_position_pct = 0.05\n")
    assert tier.load().max_position_pct == 0.05  # type: ignore[union-attr]


def test_memory_md_reads_200_lines(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("".join(f"line {i}\n" for i in range(500)))
    notes = ProjectTier(tmp_path).notes()
    assert notes.splitlines()[-1] == f"line {MEMORY_READ_LINES - 1}"
    assert len(notes.splitlines()) == MEMORY_READ_LINES


def test_auto_write_back_newest_first_dedup_and_rotation(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("# MEMORY\n\nA person's line.\n")
    tier = ProjectTier(tmp_path)
    for day in range(1, 61):
        tier.remember(
            f"2025-03-{day:02d}" if day <= 31 else f"2025-04-{day - 31:02d}",
            "BTC/USDT",
            f"entry {day}",
        )
    tier.remember("2025-04-29", "BTC/USDT", "replaced")  # same day + ticker: replaces
    tier.remember("2025-04-29", "ETH/USDT", "other ticker")
    lines = (tmp_path / "MEMORY.md").read_text().splitlines()
    auto = [ln for ln in lines if ln.startswith("- [auto ")]
    assert len(auto) == AUTO_ENTRIES_KEPT
    assert auto[0] == "- [auto 2025-04-29 ETH/USDT] other ticker"
    assert auto[1] == "- [auto 2025-04-29 BTC/USDT] replaced"
    assert not any("entry 60" in ln for ln in auto)
    assert auto[-1].startswith("- [auto 2025-03-12 ")  # the oldest rotated out
    assert "A person's line." in lines and lines[0] == "# MEMORY"


# a person's lines: anything but line breaks (\r\n, \r and \n all end a line)
_person_lines = st.lists(
    st.text(max_size=20).filter(lambda s: "\n" not in s and "\r" not in s), max_size=6
)


@settings(max_examples=examples(300), deadline=None)
@given(lines=_person_lines, newline=st.sampled_from(["\n", "\r\n"]))
@example(lines=["a\x0cb"], newline="\n")  # splitlines() split the line at the form feed
@example(lines=["a\u2028b"], newline="\n")
@example(lines=["a", "b"], newline="\r\n")  # the rewrite made a Windows file LF
def test_the_write_back_keeps_a_person_s_lines_as_they_are(lines: list[str], newline: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        tier = ProjectTier(Path(folder))
        text = "# MEMORY" + newline + newline.join(lines) + newline
        tier.memory_path.write_text(text, encoding="utf-8", newline="")
        tier.remember("2025-03-01", "BTC/USDT", "note")
        written = tier.memory_path.read_bytes().decode()
        after = [line.rstrip() for line in written.split(newline)]
    assert written.count("\n") == written.count(newline)  # one line ending, the file's own
    # trailing whitespace aside: the rewrite strips the file's end
    kept = [line for line in lines if line.strip() and not line.startswith("- [auto ")]
    assert all(line.rstrip() in after for line in kept)


def test_rules_selected_by_ticker_glob(tmp_path: Path) -> None:
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "sol.md").write_text('---\ntickers: ["SOL/*"]\n---\nSOL: half size on weekends.\n')
    (rules / "all.md").write_text("No trades in the first minute after a funding payment.\n")
    (rules / "majors.md").write_text('---\ntickers: ["BTC/*", "ETH/USDT"]\n---\nMajors first.\n')
    tier = ProjectTier(tmp_path)
    assert [r.name for r in tier.rules_for("SOL/USDT")] == ["all", "sol"]
    assert [r.name for r in tier.rules_for("ETH/USDT")] == ["all", "majors"]
    assert parse_rule("x", '---\ntickers: "*"\n---\nbody').tickers == ("*",)


@settings(max_examples=examples(300), deadline=None)
@given(value=st.text(max_size=40).map(lambda v: v.replace("\n", " ")) | st.just("[1]"))
@example(value="[" + "1" * 5000 + "]")  # json raises a plain ValueError
@example(value="[" * 100_000)  # and a RecursionError
def test_any_tickers_line_is_a_rule_or_a_tier_error(value: str) -> None:
    """A person's rule file either applies or fails its tier with a reason: anything else cost
    the decision its whole prompt context."""
    try:
        rule = parse_rule("r", f"---\ntickers: {value}\n---\nbody\n")
    except TierError as exc:
        assert "rule r" in str(exc)
    else:
        assert all(isinstance(pattern, str) for pattern in rule.tickers)


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("bom", ["", "\ufeff"])
def test_front_matter_is_read_with_windows_line_ends_and_a_byte_order_mark(
    newline: str, bom: str
) -> None:
    """Either made the front matter text: the rule applied to every ticker."""
    raw = bom + newline.join(["---", 'tickers: ["SOL/*"]', "---", "SOL: half size.", ""])
    rule = parse_rule("sol", raw)
    assert (rule.tickers, rule.text) == (("SOL/*",), "SOL: half size.")


@pytest.mark.parametrize(
    ("line", "says"),
    [
        ('ticker: ["SOL/*"]', "unknown front matter 'ticker"),  # was: every ticker
        ('Tickers: ["SOL/*"]', "unknown front matter"),
        ("tickers: SOL/USDT, ETH/USDT", "JSON list"),  # was: one pattern, no ticker
        ("tickers:", "tickers is empty"),  # was: the pattern "", no ticker
        ("tickers: ''", "tickers is empty"),
        ("tickers: []", "tickers is empty"),  # was: no ticker
        ('tickers: [""]', "tickers is empty"),
        ('tickers: ["SOL/*"]\ntickers: ["ETH/*"]', "written twice"),  # was: the last one won
    ],
)
def test_front_matter_that_would_be_ignored_is_a_tier_error(line: str, says: str) -> None:
    with pytest.raises(TierError, match="rule r: .*" + re.escape(says)):
        parse_rule("r", f"---\n{line}\n---\nbody\n")


@pytest.mark.parametrize(
    "raw",
    [
        '--- \ntickers: ["SOL/*"]\n--- \nSOL: half size.\n',  # spaces after each ---
        '\n\n---\ntickers: ["SOL/*"]\n---\nSOL: half size.\n',  # blank lines before it
        '---\ntickers: ["sol/*"]\n---\nSOL: half size.\n',  # matched no ticker
        "---\ntickers: SOL/*  # the alts\n---\nSOL: half size.\n",  # the comment was pattern
    ],
)
def test_front_matter_a_person_writes_so_is_read_as_front_matter(raw: str) -> None:
    """Each applied the rule to every ticker, its front matter sent to the model as the rule's
    text, or to no ticker at all; and no tier error said so."""
    rule = parse_rule("sol", raw)
    assert (rule.tickers, rule.text) == (("SOL/*",), "SOL: half size.")
    assert rule.applies_to("SOL/USDT") and not rule.applies_to("BTC/USDT")


def test_blank_lines_and_comments_in_front_matter_are_skipped() -> None:
    rule = parse_rule("r", '---\n# majors only\n\ntickers: ["BTC/*"]\n---\nbody\n')
    assert rule.tickers == ("BTC/*",)


def test_key_normalisation() -> None:
    assert (
        normalise_name("BTC/USDT")
        == normalise_name("btc-usdt")
        == normalise_name("BTCUSDT")
        == "btc_usdt"
    )
    assert session_key("SOL/USDT", "decision") == "ticker:sol_usdt:decision"
    assert session_key("SOL/USDT", "analysis", "Thesis 1") == "ticker:sol_usdt:analysis:thesis_1"
    with pytest.raises(ValueError, match="unknown phase"):
        session_key("SOL/USDT", "lunch")


async def test_session_ttl_eviction_and_back_fill(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=T0)
    store = SessionStore(tmp_path / "sessions", clock)
    key = session_key("BTC/USDT", "decision")
    store.set(key, {"reasoning": "breakout"}, ttl_secs=60)
    restarted = SessionStore(tmp_path / "sessions", clock)  # a restart: empty L1
    assert restarted.get(key) == {"reasoning": "breakout"} and restarted.l2_reads == 1
    assert restarted.get(key) == {"reasoning": "breakout"} and restarted.l2_reads == 1  # L1 now
    await clock.advance(61)
    assert restarted.get(key) is None  # expired: evicted from both levels
    assert not list((tmp_path / "sessions").glob("*.json"))


class _Insights:
    async def top_insights(self, ticker: str, regime: str | None, k: int) -> list[InsightItem]:
        return [InsightItem(text=f"{ticker} {regime} lesson", score=0.5, created_ms=T0 - 7_200_000)]


class _Broken:
    def load(self) -> None:
        from memory.tiers import TierError

        raise TierError("share not mounted")


async def test_assembler_skips_a_failing_tier_and_marks_stale(tmp_path: Path) -> None:
    clock = VirtualClock(epoch_ms=T0)
    session = SessionStore(tmp_path / "sessions", clock)
    session.set(session_key("BTC/USDT", "decision"), "last: hold")
    await clock.advance(10)
    (tmp_path / "MEMORY.md").write_text("# MEMORY\nwatch the weekend.\n")
    assembler = ContextAssembler(
        organisation=_Broken(),  # type: ignore[arg-type]
        project=ProjectTier(tmp_path),
        session=session,
        insights=_Insights(),
        person_notes=lambda: "my note",
    )
    ctx = await assembler.assemble(["BTC/USDT"], clock.now_ms(), {"BTC/USDT": "high_volatility"})
    assert ctx.tiers_loaded == ("project", "session")
    assert "share not mounted" in ctx.tier_errors["organisation"]
    assert (
        ctx.values["notes"].endswith("watch the weekend.")
        and ctx.values["person_notes"] == "my note"
    )
    assert ctx.session == {"ticker:btc_usdt:decision": "last: hold"}
    assert ctx.insights[0].text == "BTC/USDT high_volatility lesson"
    assert ctx.freshness["insights"].stale and ctx.stale == ["insights"]
    assert not ctx.freshness["session:ticker:btc_usdt:decision"].stale


async def test_summary_items_built_once_per_view_list_equal_those_built_again() -> None:
    from analyst_support import DAY1_MS, HOUR_MS, sent

    from agent.prompt_items import _summary_item, context_items
    from memory.analyst_store import AnalystStore
    from memory.analysts import AnalystDesk
    from memory.context import Dated, SummaryItem, dated

    desk = AnalystDesk(AnalystStore(":memory:"), ["BTC/USDT"])
    assembler = ContextAssembler(analysts=desk)

    def unmemoised(now_ms: int) -> tuple[list[SummaryItem], dict[str, Dated]]:
        items: list[SummaryItem] = []
        fresh: dict[str, Dated] = {}
        for view in desk.summaries_for("BTC/USDT", now_ms):
            for kind, text in (
                ("post_close", view.summary_post_close),
                ("pre_open", view.summary_pre_open),
            ):
                if text:
                    items.append(
                        SummaryItem(
                            analyst=view.analyst,
                            ticker="BTC/USDT",
                            kind=kind,
                            text=text,
                            made_at_ms=view.newest_ms,
                        )
                    )
            if view.newest_ms is not None:
                fresh[f"analyst:{view.analyst}:BTC/USDT"] = dated(view.newest_ms, now_ms)
        return items, fresh

    seen = set()
    for day in range(3):
        for hour in (1, 9, 17):
            now = DAY1_MS + day * 24 * HOUR_MS + hour * HOUR_MS
            await desk.roll(now)
            desk.observe(sent(80_000 + day * 900 + hour * 10, trend=["up", "down"][hour % 2]), now)
            ctx = await assembler.assemble(["BTC/USDT"], now)
            items, fresh = unmemoised(now)
            assert ctx.summaries == items
            assert ctx.freshness == fresh
            got = context_items(ctx)
            _summary_item.cache_clear()
            assert got == context_items(ctx)  # the same items when built afresh
            seen.add(tuple(s.text for s in ctx.summaries))
    assert len(seen) == 3  # a new day's summaries replaced the old ones


async def test_a_folder_in_place_of_one_session_file_leaves_out_that_key_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """After a restart, a folder where one key's file should be (a person's mistake, a restore
    gone wrong): that key is left out, said once, and every other key is read at every prompt.
    Deleting its 'file' raised IsADirectoryError out of the read, which skipped the whole
    session tier, every ticker's working context."""
    clock = VirtualClock(epoch_ms=T0)
    written = SessionStore(tmp_path / "sessions", clock)
    bad = session_key("BTC/USDT", "review")
    for name in ("BTC/USDT", "ETH/USDT"):
        written.set(session_key(name, "decision"), f"{name}: hold")
    written.set(bad, "was a file")
    path = tmp_path / "sessions" / (bad.replace(":", "__") + ".json")
    path.unlink()
    (path / "inner").mkdir(parents=True)
    session = SessionStore(tmp_path / "sessions", clock)  # a restart: empty L1
    assembler = ContextAssembler(session=session)
    for _ in range(3):
        await clock.advance(60)
        ctx = await assembler.assemble(["BTC/USDT", "ETH/USDT"], clock.now_ms())
        assert ctx.tiers_loaded == ("session",) and not ctx.tier_errors
        assert ctx.session == {
            "ticker:btc_usdt:decision": "BTC/USDT: hold",
            "ticker:eth_usdt:decision": "ETH/USDT: hold",
        }
    warned = [r for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 1 and bad in warned[0].getMessage()
    assert path.is_dir()  # a person's folder is theirs to remove


@pytest.mark.parametrize(
    ("newline", "people"),
    [
        ("\n", "Keep SOL small.\n\n\nAfter the gap.   \nA line with a\rcarriage return."),
        ("\r\n", "Keep SOL small.\r\n\r\n\r\nAfter the gap.   "),
        ("\r", "Keep SOL small.\r\r\rAfter the gap."),  # an old Mac's line ends
    ],
)
def test_the_write_back_keeps_a_persons_lines_as_they_are(
    tmp_path: Path, newline: str, people: str
) -> None:
    """Runs of blank lines were squeezed to one, trailing spaces at the end stripped, a CR-only
    file made LF and a CR inside a line split it: README promises the lines as they are."""
    tier = ProjectTier(tmp_path)
    tier.memory_path.write_bytes(f"# MEMORY{newline}{newline}{people}{newline}".encode())
    for day in ("2025-04-28", "2025-04-29"):  # twice: the rewrite is stable too
        tier.remember(day, "BTC/USDT", "held through the dip")
    text = tier.memory_path.read_bytes().decode()
    assert text.endswith(f"{newline}{people}{newline}")
    assert text.startswith(f"# MEMORY{newline}{newline}## ")
    assert text.count("[auto 2025-04-2") == 2
