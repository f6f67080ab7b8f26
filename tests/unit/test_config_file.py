"""Whatever sits at the config file's path, start-up either reads settings from it or refuses with
exit 78 saying why: never a traceback, never a stall. A directory, bytes that are not UTF-8 and an
integer of over 4,300 digits escaped as tracebacks; a FIFO blocked start-up until someone wrote to
it; a byte order mark was refused as an "invalid statement"."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.fifo import outcome_beside_fifo
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from core.errors import EXIT_REFUSE_TO_START, RefuseToStartError
from runner.cli import main
from runner.config import Settings, load_settings

#: a guard against a hang only: reading a config file takes milliseconds


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No VIGIL_* variables from the host, an empty secrets dir, cwd in tmp_path."""
    for name in list(os.environ):
        if name.upper().startswith("VIGIL_"):
            monkeypatch.delenv(name)
    (tmp_path / "secrets").mkdir()
    monkeypatch.setenv("VIGIL_SECRETS_DIR", str(tmp_path / "secrets"))
    monkeypatch.chdir(tmp_path)
    return tmp_path


def _load_from(path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings | RefuseToStartError:
    monkeypatch.setenv("VIGIL_CONFIG_FILE", str(path))
    try:
        return load_settings()
    except RefuseToStartError as exc:
        return exc


def test_a_fifo_is_refused_without_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fifo = tmp_path / "vigil.toml"
    os.mkfifo(fifo)
    got = outcome_beside_fifo(lambda: _load_from(fifo, monkeypatch), fifo)
    assert isinstance(got, RefuseToStartError)
    assert "not a regular file" in str(got) and str(fifo) in str(got)


@pytest.mark.parametrize(
    ("content", "says"),
    [
        (None, "not a regular file"),  # a directory
        (b'[market]\nsource = "\xff"\n', "not UTF-8 text: byte 0xff at offset 19"),
        (b"[market]\nhistory_days = " + b"9" * 4301 + b"\n", "number too long"),
        (b"x = " + b"[" * 100_000, "too deep"),
    ],
)
def test_an_unusable_file_is_refused_with_exit_78_naming_it(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    content: bytes | None,
    says: str,
) -> None:
    path = tmp_path / "conf.toml"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    monkeypatch.setenv("VIGIL_CONFIG_FILE", str(path))  # --config sets it; undone after the test
    assert main(["--config", str(path), "config", "show"]) == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert f"config file {path}" in err and says in err
    assert "Traceback" not in err


def test_a_byte_order_mark_is_not_content(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "vigil.toml"
    path.write_bytes(b'\xef\xbb\xbf[market]\nsource = "sim"\n')
    got = _load_from(path, monkeypatch)
    assert isinstance(got, Settings) and got.market.source == "sim"


@settings(
    max_examples=examples(150),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    content=st.one_of(
        st.binary(max_size=200),
        st.text(max_size=200).map(str.encode),
        st.sampled_from([b"[market]\n", b"[sim]\n", b"[agent]\n", b""]).flatmap(
            lambda head: st.binary(max_size=100).map(lambda tail: head + tail)
        ),
    )
)
def test_any_bytes_give_settings_or_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    path = tmp_path / "any.toml"
    path.write_bytes(content)
    got = _load_from(path, monkeypatch)  # anything else raised fails the test
    assert isinstance(got, Settings | RefuseToStartError)
