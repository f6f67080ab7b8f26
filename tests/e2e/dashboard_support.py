"""The dashboard's memory editor driven as a person would, for the browser tests (a helper
module; no tests)."""

from __future__ import annotations

import json

from cdp_support import Page

#: the page's own waits, with room for a loaded host
SAVE_WAIT_SECS = 60.0


async def save_notes(page: Page, text: str) -> tuple[str, str]:
    """``text`` typed into the notes and saved: the result the page shows, as its value
    ("accepted", "rejected") and its text. The result is cleared first, so a second save is not
    read off the first one's. The page shows it before it loads the texts again after a save:
    a test of what the boxes show then waits for them."""
    result = "document.getElementById('memory-result')"
    await page.evaluate(f"{result}.dataset.value = ''")
    await page.evaluate(f"document.getElementById('notes').value = {json.dumps(text)}")
    await page.evaluate("document.getElementById('memory').requestSubmit()")
    await page.wait_for(f"{result}.dataset.value", SAVE_WAIT_SECS)
    value, shown = await page.evaluate(f"(e => [e.dataset.value, e.textContent])({result})")
    return str(value), str(shown)
