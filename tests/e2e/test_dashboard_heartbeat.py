"""The dashboard's heartbeat card for a heartbeat dated in the future (a clock stepped back, a
restored backup): ``/api/status`` gives it no age and says why, and the card said "none", as for
a state dir that never had a heartbeat, hiding what ``vigil status`` says."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from cdp_support import open_browser
from fakes.api_support import serve_api, write_state_dir

pytestmark = pytest.mark.e2e

CARD_JS = """(() => {
  const el = document.getElementById("heartbeat");
  return [el.textContent, el.dataset.value];
})()"""


async def _card(tmp_path: Path, state_dir: Path) -> list[str]:
    async with serve_api(state_dir) as api, open_browser(tmp_path / "profile") as page:
        await page.send("Page.navigate", url=f"{api.url}/dashboard#token={api.token}")
        await page.wait_for("document.body.dataset.state === 'ready'", 30)
        await page.wait_for("document.getElementById('heartbeat').textContent !== ''", 30)
        card: list[str] = await page.evaluate(CARD_JS)
        # a state dir has no live stream (a 404 the page shows): only a script error counts
        thrown = [e for e in page.errors() if e["source"] == "exception"]
        assert not thrown, thrown
    return card


@pytest.mark.timeout(120)
async def test_a_heartbeat_dated_in_the_future_is_said_not_shown_as_none(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    beat = state_dir / "heartbeat"
    beat.write_text("{}")
    stamp = time.time() + 3600
    os.utime(beat, (stamp, stamp))
    text, value = await _card(tmp_path, state_dir)
    assert text.startswith("heartbeat dated in the future: "), json.dumps(text)
    assert value == ""


@pytest.mark.timeout(120)
async def test_no_heartbeat_file_is_still_none(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    (state_dir / "heartbeat").unlink(missing_ok=True)
    assert await _card(tmp_path, state_dir) == ["none", ""]
