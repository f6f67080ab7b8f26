"""replace_if_holds: the write-only-if-unchanged guard the state store and MEMORY.md share, by
exchange (checked before it or not) and by check-then-rename where there is no exchange."""

from __future__ import annotations

from pathlib import Path

import pytest

import state.atomic
from core.regular_file import read_bytes_or_none
from state.atomic import (
    ChangedWhileSavingError,
    SwapUnsupportedError,
    replace_if_holds,
)

# (exchange tried, check before the exchange, exchange available on this file system)
CHECKED_MODES = {
    "exchange, checked first": (True, True, True),
    "check-then-rename by choice": (False, False, True),
    "check-then-rename, no exchange here": (True, False, False),
}


@pytest.fixture
def target(tmp_path: Path) -> Path:
    path = tmp_path / "state.json"
    path.write_bytes(b"as read")
    return path


def _write(
    path: Path, data: bytes, expected: bytes | None, mode: tuple[bool, bool, bool]
) -> tuple[bytes | None, list[SwapUnsupportedError]]:
    exchange, check_first, _ = mode
    unsupported: list[SwapUnsupportedError] = []
    written, replaced = replace_if_holds(
        path,
        data,
        expected,
        check_before_exchange=check_first,
        exchange=exchange,
        on_swap_unsupported=unsupported.append,
    )
    assert written.st_ino == path.stat().st_ino
    return replaced, unsupported


@pytest.fixture(params=list(CHECKED_MODES))
def mode(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch
) -> tuple[bool, bool, bool]:
    chosen = CHECKED_MODES[request.param]
    if not chosen[2]:
        monkeypatch.setattr(state.atomic, "_libc_renameat2", lambda: None)
    return chosen


def test_a_file_that_holds_the_expected_bytes_is_replaced(
    target: Path, mode: tuple[bool, bool, bool]
) -> None:
    replaced, unsupported = _write(target, b"new", b"as read", mode)
    assert replaced == b"as read"
    assert target.read_bytes() == b"new"
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]
    exchange_tried, _, exchange_here = mode
    assert len(unsupported) == (1 if exchange_tried and not exchange_here else 0)
    assert all(isinstance(exc, SwapUnsupportedError) for exc in unsupported)


def test_a_missing_file_expected_missing_is_created(
    tmp_path: Path, mode: tuple[bool, bool, bool]
) -> None:
    path = tmp_path / "state.json"
    replaced, _ = _write(path, b"first", None, mode)
    assert (replaced, path.read_bytes()) == (None, b"first")


@pytest.mark.parametrize(
    ("on_disk", "expected"),
    [(b"a person's save", b"as read"), (None, b"as read"), (b"appeared", None)],
    ids=["edited", "deleted", "created"],
)
def test_a_file_changed_since_the_read_is_left_untouched(
    tmp_path: Path, mode: tuple[bool, bool, bool], on_disk: bytes | None, expected: bytes | None
) -> None:
    path = tmp_path / "state.json"
    if on_disk is not None:
        path.write_bytes(on_disk)
    with pytest.raises(ChangedWhileSavingError):
        _write(path, b"new", expected, mode)
    assert read_bytes_or_none(path) == on_disk
    assert [p.name for p in tmp_path.iterdir()] == ([] if on_disk is None else ["state.json"])


def test_an_unchecked_exchange_hands_back_the_save_it_replaced(target: Path) -> None:
    # the state store's way: no check, it judges whatever the exchange hands back
    target.write_bytes(b"a person's save")
    _, replaced = replace_if_holds(target, b"new", b"as read", check_before_exchange=False)
    assert (replaced, target.read_bytes()) == (b"a person's save", b"new")


def test_a_save_between_the_check_and_the_exchange_is_handed_back(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = state.atomic._renameat2

    def save_then_rename(src: Path, dst: Path, flags: int) -> None:
        dst.write_bytes(b"saved just now")  # after the check passed
        real(src, dst, flags)

    monkeypatch.setattr(state.atomic, "_renameat2", save_then_rename)
    _, replaced = replace_if_holds(target, b"new", b"as read", check_before_exchange=True)
    assert (replaced, target.read_bytes()) == (b"saved just now", b"new")
    assert [p.name for p in target.parent.iterdir()] == ["state.json"]


def test_no_exchange_is_tried_when_the_caller_knows_there_is_none(
    target: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_swap(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("the exchange was tried")

    monkeypatch.setattr(state.atomic, "atomic_swap_bytes", no_swap)
    _, replaced = replace_if_holds(
        target, b"new", b"as read", check_before_exchange=True, exchange=False
    )
    assert (replaced, target.read_bytes()) == (b"as read", b"new")
