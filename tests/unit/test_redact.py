"""Secret-shaped text is redacted; file paths, which "/" makes look like base64, are not."""

from __future__ import annotations

import base64
import random

from hypothesis import given
from hypothesis import strategies as st

from core.redact import Redactor

REDACT = Redactor()

# a path's parts: words, capitalised words, numbers, timestamps (kept short enough that no part
# is itself hex key material or an AWS key id)
_PATH_PARTS = st.from_regex(r"[A-Z]?[a-z0-9]{0,20}|[A-Z0-9]{0,16}", fullmatch=True)


def test_a_log_line_naming_a_run_folder_keeps_its_path() -> None:
    # the line CI printed with the path cut by a redaction (pytest's shortened test folder name)
    line = (
        "run 20261128T171408Z-d29545: its folder /tmp/pytest-of-root/pytest-412/popen-gw1/"
        "test_a_finished_run_whose_fold0/state/runs/20261128T171408Z-d29545 was removed"
    )
    assert REDACT.redact(line) == (line, 0)


def test_relative_and_capitalised_paths_are_kept() -> None:
    line = "wrote Documents/Projects/Vigil2026/state/runs/20261128T171408Z/report.json"
    assert REDACT(line) == line


def test_a_path_through_a_short_random_folder_name_is_kept() -> None:
    line = "state dir /tmp/tmp.UjgjrVqDO1/state/runs/20261128T171408Z-d29545"  # mktemp -d
    assert REDACT(line) == line


@given(parts=st.lists(_PATH_PARTS, min_size=2, max_size=12), lead=st.sampled_from(["", "/", "_"]))
def test_any_path_of_word_shaped_parts_is_kept(parts: list[str], lead: str) -> None:
    line = f"folder {lead}{'/'.join(parts)} was removed"
    assert REDACT(line) == line


def test_a_key_with_slashes_is_still_redacted() -> None:
    aws_example_secret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
    assert REDACT.redact(f"secret={aws_example_secret} end") == ("secret=[REDACTED:secret] end", 1)


def test_random_base64_keys_with_slashes_are_redacted() -> None:
    rng = random.Random(20261128)
    keys = [base64.b64encode(rng.randbytes(30)).decode() for _ in range(20_000)]
    with_slash = [key for key in keys if "/" in key]
    assert len(with_slash) > 5_000
    leaked = [key for key in with_slash if REDACT(f"key {key}") != "key [REDACTED:secret]"]
    # the path rule misses none: the keys kept are those without a digit, a lower or an upper
    # case letter, which the shape rule keeps with or without slashes (5 of 9,354 here)
    lacking_a_kind = [
        key
        for key in with_slash
        if not all(any(test(c) for c in key) for test in (str.isdigit, str.islower, str.isupper))
    ]
    assert leaked == lacking_a_kind
