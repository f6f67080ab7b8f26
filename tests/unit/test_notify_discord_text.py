"""Any text in a Discord notification is shown as written: every character Discord reads as
markdown or a mention reaches it escaped, and taking the escapes away gives the line back."""

from __future__ import annotations

import re

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import SecretStr

from api.notify.config import WebhookConfig
from api.notify.messages import DISCORD_MAX_CHARS, Notification, line, payload

DISCORD = WebhookConfig(url=SecretStr("https://discord.example/api/webhooks/1/x"), kind="discord")
MARKUP = "\\*_~`|[]<>@"


@settings(max_examples=examples(300), deadline=None)
@given(text=st.text(alphabet=st.sampled_from(MARKUP + "(a) :/#-") | st.characters(), max_size=600))
def test_any_text_reaches_discord_escaped(text: str) -> None:
    notification = Notification(event="trading_halted", at_ms=1_740_787_200_000, text=text)
    content = payload(DISCORD, notification)["content"]
    assert len(content) <= DISCORD_MAX_CHARS
    # read as Discord reads escapes, left to right: no markup character stands unescaped
    unescaped = [
        m.group() for m in re.finditer(r"\\.|.", content, re.DOTALL) if len(m.group()) == 1
    ]
    assert not set("".join(unescaped)) & set(MARKUP)
    assert re.sub(r"\\(.)", r"\1", content, flags=re.DOTALL) == line(notification)
