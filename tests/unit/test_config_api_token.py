"""The API's token is what a client sends as ``Authorization: Bearer <token>``: one no request can
carry (only spaces, a space at either end, a non-ASCII letter or a control character, longer than
a header) was taken, and the API refused every request as a wrong token, the dashboard and
``vigil status`` included. Such a token refuses to start (exit 78) naming the setting, never
quoting the secret; a token of visible ASCII is taken as before."""

from __future__ import annotations

import pytest

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main
from runner.config import load_settings

pytestmark = pytest.mark.usefixtures("own_config")


@pytest.mark.parametrize(
    ("token", "why"),
    [
        ("   ", "only spaces"),
        (" s3cretvalue", "begins or ends with a space"),
        ("s3cretvalue ", "begins or ends with a space"),
        ("s3crét-value", "not visible ASCII at position 5"),
        ("s3cret\tvalue", "not visible ASCII at position 7"),
        ("s" * 4097, "4,097 characters"),
    ],
)
def test_a_token_no_request_can_carry_is_refused_without_quoting_it(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], token: str, why: str
) -> None:
    monkeypatch.setenv("VIGIL_API_TOKEN", token)
    assert main(["config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert "api_token = <secret>" in err and why in err
    assert "s3cret" not in err and "sss" not in err


@pytest.mark.parametrize("token", ["abc-DEF_123.~+/=", "two words", "!#$%&'*,;<>?@[]^`{|}"])
def test_a_token_of_visible_ascii_is_taken(monkeypatch: pytest.MonkeyPatch, token: str) -> None:
    monkeypatch.setenv("VIGIL_API_TOKEN", token)
    configured = load_settings().api_token
    assert configured is not None and configured.get_secret_value() == token
