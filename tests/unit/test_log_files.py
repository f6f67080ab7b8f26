"""Logs: JSON lines on request, a size-rotated file in the state dir's logs/ capped in total size,
secrets redacted in every handler."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest
from pydantic import ValidationError

from core.errors import RefuseToStartError
from runner.commands import _overrides, _parser
from runner.config import Settings
from runner.logging_setup import LogConfig, configure_logging

SECRET = "sk-ant-log-secret-0123456789abcdef"


def test_json_lines_go_to_the_rotated_file_with_secrets_redacted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    config = LogConfig(format="json")
    configure_logging("INFO", [SECRET], config=config, log_file=log_file)
    log = logging.getLogger("vigil.test")
    log.info("calling with key %s", SECRET)
    try:
        raise RuntimeError(f"bad key {SECRET}")
    except RuntimeError:
        log.exception("failed")
    lines = [json.loads(x) for x in log_file.read_text().splitlines()]
    assert [(x["level"], x["logger"]) for x in lines] == [
        ("INFO", "vigil.test"),
        ("ERROR", "vigil.test"),
    ]
    assert lines[0]["message"].startswith("calling with key ") and lines[0]["ts"].endswith("Z")
    assert "RuntimeError" in lines[1]["exc"]
    console = capsys.readouterr().err
    assert [json.loads(x)["message"] for x in console.splitlines()][1] == "failed"
    assert SECRET not in log_file.read_text() and SECRET not in console


def test_the_log_file_rotates_by_size_within_its_total_cap(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    config = LogConfig(file_max_bytes=2000, file_backups=2)
    configure_logging("INFO", config=config, log_file=log_file)
    for n in range(200):
        logging.getLogger("vigil.test").info("line %d %s", n, "x" * 60)
    files = sorted(p.name for p in log_file.parent.iterdir())
    assert files == ["vigil.log", "vigil.log.1", "vigil.log.2"]
    total = sum(p.stat().st_size for p in log_file.parent.iterdir())
    assert total <= config.total_cap_bytes
    assert "line 199 " in log_file.read_text()  # text format by default, newest in vigil.log


def test_no_file_when_turned_off(tmp_path: Path) -> None:
    log_file = tmp_path / "logs" / "vigil.log"
    configure_logging("INFO", config=LogConfig(file=False), log_file=log_file)
    logging.getLogger("vigil.test").warning("console only")
    assert not log_file.exists()


def test_log_format_flag_and_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    args = _parser().parse_args(["--log-format", "json", "--state-dir", str(tmp_path), "run"])
    assert Settings(**_overrides(args)).log.format == "json"
    monkeypatch.setenv("VIGIL_LOG__FORMAT", "json")
    monkeypatch.setenv("VIGIL_LOG__FILE_MAX_BYTES", "1048576")
    settings = Settings(state_dir=tmp_path)
    assert (settings.log.format, settings.log.file_max_bytes) == ("json", 1 << 20)
    assert settings.digest() == Settings(state_dir=tmp_path, log=LogConfig()).digest()


def test_an_unusable_log_folder_refuses_to_start(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the state dir should be")
    with pytest.raises(RefuseToStartError, match=r"not-a-dir/state/logs/vigil.log cannot be"):
        configure_logging("INFO", log_file=blocker / "state" / "logs" / "vigil.log")
    assert blocker.read_text() == "a file where the state dir should be"


def test_a_number_of_backups_no_rollover_can_look_through_is_refused() -> None:
    """``file_backups = 10**12``: the first rollover looked for each backup's name on the event
    loop, and the daemon took no decision and ignored SIGTERM."""
    assert LogConfig(file_backups=1000).file_backups == 1000
    with pytest.raises(ValidationError, match="less than or equal to 1000"):
        LogConfig(file_backups=10**12)
