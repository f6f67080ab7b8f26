"""Any webhook url: refused (never quoting it: it holds the hook's secret), or one a POST can
reach, an http(s) url with a host and a port of 1 .. 65535."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples
from pydantic import SecretStr, ValidationError
from yarl import URL

from api.notify.config import WebhookConfig

SECRET = "s3cr3t-token"
PARTS = st.sampled_from(["http", "https", "HTTPS", "ftp", "", ":", "//", "://", "/", "[", "]",
                         "::1", "@", "user", "host", "h.example", ".", ":0", ":80", ":99999",
                         ":-1", ":abc", "?q", "#f", " ", "%", "\x00"])  # fmt: skip


@settings(max_examples=examples(300), deadline=None)
@given(parts=st.lists(PARTS | st.text(max_size=3), max_size=8))
def test_a_webhook_url_is_refused_unquoted_or_reachable(parts: list[str]) -> None:
    url = "".join(parts) + "/" + SECRET
    try:
        WebhookConfig(url=SecretStr(url))
    except ValidationError as exc:
        assert SECRET not in str(exc)
        return
    parsed = URL(url)
    assert parsed.scheme in {"http", "https"} and parsed.host
    assert parsed.port is not None and 1 <= parsed.port <= 65535
