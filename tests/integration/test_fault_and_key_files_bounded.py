"""The journal's fault file (``state.journal_health.read_fault_file``) and the ccxt broker's key
files (``broker.live_guard.load_api_keys``, ``BINANCE_API_KEY_FILE`` / ``_SECRET_FILE``) were
read whole by name: a gigabyte there (a crash's zeros, here a sparse file) was taken whole before
it was found to be no fault or no key, and a FIFO held the reader until someone wrote to it. Each
is now read as the other small files are (``core.regular_file``): a regular file within a bound,
anything else a clear error naming it.

The gigabyte is read in a child process whose address space is capped: the old read died there
of ``MemoryError`` instead of taking the machine's memory."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from fakes.capped_child import GIGABYTE, run_capped, sparse_size
from fakes.fifo import outcome_beside_fifo

from broker.live_guard import load_api_keys
from core.errors import RefuseToStartError
from state.journal_health import FAULT_FILE_NAME, read_fault_file

_MEMORY_LIMIT = 1 << 30

_READ_FAULT = (
    "import sys\nfrom pathlib import Path\nfrom state.journal_health import read_fault_file\n"
    "print(read_fault_file(Path(sys.argv[1])))\n"
)
_LOAD_KEYS = (
    "import sys\nfrom broker.live_guard import load_api_keys\nfrom core.errors import "
    "RefuseToStartError\ntry:\n    load_api_keys({'BINANCE_API_KEY': 'k', "
    "'BINANCE_API_SECRET_FILE': sys.argv[1]})\nexcept RefuseToStartError as exc:\n"
    "    print(exc)\n"
)


@pytest.mark.timeout(120)
def test_a_fault_file_of_a_gigabyte_is_unreadable_not_read_whole(tmp_path: Path) -> None:
    sparse_size(tmp_path / FAULT_FILE_NAME, GIGABYTE)
    done = run_capped(_READ_FAULT, str(tmp_path), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (
        "'unreadable': 'FileTooLargeError: " in done.stdout and "over the 1,048,576" in done.stdout
    )


def test_a_fifo_at_the_fault_file_is_unreadable_not_waited_on(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / FAULT_FILE_NAME)
    fault = outcome_beside_fifo(lambda: read_fault_file(tmp_path), tmp_path / FAULT_FILE_NAME)
    assert isinstance(fault, dict) and "is not a regular file (a FIFO)" in fault["unreadable"]


@pytest.mark.timeout(120)
def test_a_key_file_of_a_gigabyte_refuses_the_start_naming_it(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    sparse_size(secret, GIGABYTE)
    done = run_capped(_LOAD_KEYS, str(secret), limit_bytes=_MEMORY_LIMIT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"BINANCE_API_SECRET_FILE='{secret}' cannot be read" in done.stdout
    assert "over the 65,536 read" in done.stdout


def test_a_fifo_as_a_key_file_refuses_the_start_naming_it(tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    os.mkfifo(secret)
    env = {"BINANCE_API_KEY": "k", "BINANCE_API_SECRET_FILE": str(secret)}
    outcome = outcome_beside_fifo(lambda: load_api_keys(env), secret)
    assert isinstance(outcome, RefuseToStartError)
    assert "is not a regular file (a FIFO)" in str(outcome)


def test_a_key_file_s_byte_order_mark_is_no_part_of_the_key(tmp_path: Path) -> None:
    """An editor's BOM was kept at the start of the secret: every signed request refused."""
    secret = tmp_path / "secret"
    secret.write_bytes("\ufeffthe-secret\n".encode())
    keys = load_api_keys({"BINANCE_API_KEY": "k", "BINANCE_API_SECRET_FILE": str(secret)})
    assert keys.api_secret.get_secret_value() == "the-secret"
