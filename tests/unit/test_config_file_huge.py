"""A config file past ``CONFIG_FILE_MAX_BYTES`` (1 MiB; a full vigil.toml is a few kilobytes) is
refused naming it without being read. A log or a sparse file of gigabytes given as ``--config``
was read whole, then decoded whole, before TOML refused it (3 GB: 6.3 GB resident, 15 s)."""

from __future__ import annotations

from pathlib import Path

import pytest
from fakes.allocation_peak import allocation_peak

from core.errors import EXIT_REFUSE_TO_START
from runner.cli import main
from runner.config import CONFIG_FILE_MAX_BYTES

pytestmark = pytest.mark.usefixtures("own_config")


def test_a_sparse_file_of_gigabytes_is_refused_without_reading_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "vigil.log"
    with path.open("wb") as handle:
        handle.truncate(2 << 30)
    with allocation_peak() as allocated:
        code = main(["--config", str(path), "config", "show"])
    assert code == EXIT_REFUSE_TO_START
    err = capsys.readouterr().err
    assert f"config file {path} is 2,147,483,648 bytes, over the 1,048,576 read" in err
    assert allocated.peak_bytes < 16 << 20


def test_a_file_at_the_limit_is_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "vigil.toml"
    body = b"[sim]\nspeed = 7\n"
    path.write_bytes(body + b"#" * (CONFIG_FILE_MAX_BYTES - len(body) - 1) + b"\n")
    assert path.stat().st_size == CONFIG_FILE_MAX_BYTES
    assert main(["--config", str(path), "config", "show"]) == 0
    assert '"speed": 7.0' in capsys.readouterr().out
