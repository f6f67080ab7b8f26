"""ProjectTier.remember and a person saving MEMORY.md while it writes: their save is never lost.

The person's save is injected at a fixed step of the write (no threads, no sleeps): after the
daemon read the file and wrote its temporary file (``_write_durable_tmp``), or between the
check and the exchange itself (``_renameat2``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import state.atomic
from memory.tiers import ProjectTier, TierError
from state.merge_write import MERGE_ATTEMPTS, merge_write

START = "# MEMORY\n\n## vigil (auto: newest first, one per day and ticker, 50 kept)\n"
EARLIER = "- [auto 2025-03-01 ETH/USDT] SELL 5% by rules: earlier\n"


class PersonSaves:
    """Writes ``saves`` (in turn) to MEMORY.md, one each time the patched step runs."""

    def __init__(self, path: Path, saves: list[bytes]) -> None:
        self.path, self.saves = path, list(saves)
        self.landed: list[bytes] = []

    def __call__(self) -> None:
        if self.saves:
            save = self.saves.pop(0)
            self.path.write_bytes(save)  # in place, as many editors save
            self.landed.append(save)


@pytest.fixture
def tier(tmp_path: Path) -> ProjectTier:
    (tmp_path / "MEMORY.md").write_text(START + EARLIER + "\nMy first note.\n")
    return ProjectTier(tmp_path)


def _after_tmp_written(monkeypatch: pytest.MonkeyPatch, save: Callable[[], None]) -> None:
    real = state.atomic._write_durable_tmp

    def step(target: Path, data: bytes, *, durable: bool = True) -> tuple[Path, object]:
        save()
        return real(target, data, durable=durable)

    monkeypatch.setattr(state.atomic, "_write_durable_tmp", step)


def _before_exchange(monkeypatch: pytest.MonkeyPatch, save: Callable[[], None]) -> None:
    real = state.atomic._renameat2

    def step(src: Path, dst: Path, flags: int) -> None:
        if flags == state.atomic._RENAME_EXCHANGE:
            save()
        real(src, dst, flags)

    monkeypatch.setattr(state.atomic, "_renameat2", step)


@pytest.fixture(params=["exchange", "rename"])
def exchange(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """Both write paths: the atomic exchange, and the plain rename where there is none."""
    if request.param == "rename":
        monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    yield request.param


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_a_save_after_the_read_is_merged_not_overwritten(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch, exchange: str, newline: str
) -> None:
    saved = (START + EARLIER + "\nMy first note.\nMy second note, saved just now.\n").replace(
        "\n", newline
    )
    person = PersonSaves(tier.memory_path, [saved.encode()])
    _after_tmp_written(monkeypatch, person)
    tier.remember("2025-03-02", "BTC/USDT", "BUY 10% by rules: breakout")
    assert person.landed  # the save did land between the read and the replace
    assert tier.memory_path.read_bytes().decode() == (
        START
        + "- [auto 2025-03-02 BTC/USDT] BUY 10% by rules: breakout\n"
        + EARLIER
        + "\nMy first note.\nMy second note, saved just now.\n"
    ).replace("\n", newline)
    assert "My second note" in tier.notes()


def test_a_save_between_the_check_and_the_exchange_is_merged(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    saved = START + EARLIER + "\nMy first note, edited.\n"
    person = PersonSaves(tier.memory_path, [saved.encode()])
    _before_exchange(monkeypatch, person)
    tier.remember("2025-03-02", "BTC/USDT", "BUY 10% by rules: breakout")
    assert person.landed
    text = tier.memory_path.read_text()
    assert "My first note, edited." in text and "My first note.\n" not in text
    assert "- [auto 2025-03-02 BTC/USDT] BUY 10% by rules: breakout" in text
    assert EARLIER in text
    assert [p.name for p in tier.memory_path.parent.iterdir()] == ["MEMORY.md"]


LATIN1_SAVE = b"# MEMORY\nLatin-1 from an old editor: caf\xe9\n"


def _latin1_save_is_left_as_it_is(tier: ProjectTier) -> None:
    with pytest.raises(TierError, match=r"MEMORY\.md: .*left as it is, its \[auto\] line"):
        tier.remember("2025-03-02", "BTC/USDT", "BUY")
    assert tier.memory_path.read_bytes() == LATIN1_SAVE


def test_a_save_that_is_not_utf8_is_left_as_it_is(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch, exchange: str
) -> None:
    _after_tmp_written(monkeypatch, PersonSaves(tier.memory_path, [LATIN1_SAVE]))
    _latin1_save_is_left_as_it_is(tier)


def test_a_save_that_is_not_utf8_replaced_by_the_exchange_is_put_back(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    _before_exchange(monkeypatch, PersonSaves(tier.memory_path, [LATIN1_SAVE]))
    _latin1_save_is_left_as_it_is(tier)


SAVES_AT_EVERY_ATTEMPT = [f"# MEMORY\nsave {i}\n".encode() for i in range(MERGE_ATTEMPTS)]


def _gives_up_leaving_the_latest_save(tier: ProjectTier, person: PersonSaves) -> None:
    with pytest.raises(TierError, match=r"kept changing.*"):
        tier.remember("2025-03-02", "BTC/USDT", "BUY")
    assert person.landed == SAVES_AT_EVERY_ATTEMPT
    assert tier.memory_path.read_bytes() == SAVES_AT_EVERY_ATTEMPT[-1]  # as it was saved


def test_a_file_that_keeps_changing_keeps_the_person_s_latest_save(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch, exchange: str
) -> None:
    person = PersonSaves(tier.memory_path, list(SAVES_AT_EVERY_ATTEMPT))
    _after_tmp_written(monkeypatch, person)
    _gives_up_leaving_the_latest_save(tier, person)


def test_a_file_created_while_it_writes_is_merged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: str
) -> None:
    tier = ProjectTier(tmp_path)
    _after_tmp_written(monkeypatch, PersonSaves(tier.memory_path, [b"# Notes\nmine\n"]))
    tier.remember("2025-03-02", "BTC/USDT", "BUY")
    assert tier.memory_path.read_text() == (
        "# Notes\n\n## vigil (auto: newest first, one per day and ticker, 50 kept)\n"
        "- [auto 2025-03-02 BTC/USDT] BUY\n\nmine\n"
    )


def test_saves_at_every_exchange_leave_the_person_s_latest_save(
    tier: ProjectTier, monkeypatch: pytest.MonkeyPatch
) -> None:
    person = PersonSaves(tier.memory_path, list(SAVES_AT_EVERY_ATTEMPT))
    _before_exchange(monkeypatch, person)
    _gives_up_leaving_the_latest_save(tier, person)


def test_without_an_exchange_each_write_renames_at_once_and_it_is_said_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The exchange is tried once per folder: each write used to write a durable temporary file,
    fail the exchange, delete it and write another for the rename."""
    monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    written = []
    real = state.atomic._write_durable_tmp

    def counted(target: Path, data: bytes, *, durable: bool = True) -> tuple[Path, object]:
        written.append(data)
        return real(target, data, durable=durable)

    monkeypatch.setattr(state.atomic, "_write_durable_tmp", counted)
    path = tmp_path / "MEMORY.md"
    with caplog.at_level(logging.WARNING, logger="state.merge_write"):
        for n in range(3):

            def append(old: bytes | None, n: int = n) -> bytes:
                return (old or b"") + f"line {n}\n".encode()

            merge_write(path, append)
    assert path.read_bytes() == b"line 0\nline 1\nline 2\n"
    assert len(written) == 4  # the first write's failed exchange, then one per write
    assert [r.message for r in caplog.records].count(caplog.records[0].message) == 1
    assert "cannot swap files atomically" in caplog.text
