"""The dashboard's memory editor saves only the texts the person changed. It sent both as the page
had loaded them, so saving a note put back the agent's memory as it was when the page opened: a
memory a decision wrote since (Claude's ``memory_update``) was reverted without a word. And a text
the person did change, saved otherwise since the page loaded it, is refused (409) with the typed
text left in its box, where it was replaced unseen."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cdp_support import open_browser
from dashboard_support import save_notes
from fakes.api_support import serve_api, write_state_dir

from state.models import parse_state_bytes, render_state

pytestmark = pytest.mark.e2e

PAGE_WAIT_SECS = 60.0  # the page's own waits, with room for a loaded host
SINCE = "learned since the page opened: fade BTC pumps"
OTHER_EDITOR = "another editor's notes: flat until CPI"


@pytest.mark.timeout(240)
async def test_saving_the_notes_keeps_the_memory_written_since_the_page_loaded(
    tmp_path: Path,
) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    path = state_dir / "runner_state.json"
    async with serve_api(state_dir) as api, open_browser(tmp_path / "profile") as page:
        await page.send("Page.navigate", url=f"{api.url}/dashboard#token={api.token}")
        await page.wait_for("document.body.dataset.state === 'ready'", PAGE_WAIT_SECS)
        loaded = await page.evaluate("document.getElementById('agent-memory').value")
        state, _ = parse_state_bytes(path.read_bytes())
        path.write_bytes(render_state(state.model_copy(update={"agent_memory": SINCE})))
        result, _ = await save_notes(page, "watch ETH")
        after, _ = parse_state_bytes(path.read_bytes())
        assert loaded == "Trend is up." and result == "accepted"
        assert (after.notes, after.agent_memory) == ("watch ETH", SINCE)
        # the page shows what is saved: it loads the texts again after it shows the result, so
        # this waits for them (read at once, it raced that load and saw the old memory)
        await page.wait_for(
            f"document.getElementById('agent-memory').value === {json.dumps(SINCE)}",
            PAGE_WAIT_SECS,
        )

        # another editor saves the notes; this page, still showing "watch ETH", edits them too
        path.write_bytes(render_state(after.model_copy(update={"notes": OTHER_EDITOR})))
        refused, said = await save_notes(page, "watch SOL")
        typed = await page.evaluate("document.getElementById('notes').value")
    assert refused == "rejected" and "notes changed since" in said, said
    assert typed == "watch SOL"  # the person's text is not lost
    assert parse_state_bytes(path.read_bytes())[0].notes == OTHER_EDITOR
