"""A Python child process whose address space is capped, and the huge inputs it is given: a file
made a gigabyte long by zeros that take no disk (a crash's extension) or a gzip bomb (a few hundred
kB that inflate past a bound). A reader that held the whole input died there of ``MemoryError``
instead of taking the machine's memory; a bounded one finishes."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Final

GIGABYTE: Final = 1 << 30
REPO: Final = Path(__file__).resolve().parents[2]
#: the child's script that runs ``vigil`` with the child's argv
CLI: Final = "import sys\nfrom runner.cli import main\nsys.exit(main(sys.argv[1:]))\n"
_MEMBER_BYTES: Final = 64 << 20


def run_capped(
    script: str,
    *argv: str,
    limit_bytes: int,
    timeout_secs: float = 100.0,
    env: Mapping[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``script`` (Python source) run with ``argv`` from the repo's root (its code imported),
    its address space capped at ``limit_bytes``; ``env`` is added to this process's."""
    cap = (
        f"import resource\nresource.setrlimit(resource.RLIMIT_AS, ({limit_bytes}, {limit_bytes}))\n"
    )
    return subprocess.run(
        [sys.executable, "-c", cap + script, *argv],
        cwd=REPO,
        env=None if env is None else {**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=timeout_secs,
        check=False,
    )


def sparse_size(path: Path, size_bytes: int) -> None:
    """``path`` (made if missing) ``size_bytes`` long: past its content, zeros that take no disk."""
    path.touch()
    os.truncate(path, size_bytes)


def write_gzip_bomb(path: Path, past_bytes: int, row: bytes, head: bytes = b"") -> None:
    """A gzip file inflating to ``head`` then ``row`` over and over, past ``past_bytes``: gzip
    members one after another are one gzip file, so one member is compressed and written as often
    as it takes (a few hundred kB on disk)."""
    member = gzip.compress(row * (_MEMBER_BYTES // len(row)), compresslevel=9, mtime=0)
    members = past_bytes // (_MEMBER_BYTES // len(row) * len(row)) + 1
    with path.open("wb") as out:
        if head:
            out.write(gzip.compress(head, mtime=0))
        for _ in range(members):
            out.write(member)
