"""The organisation and project tiers of the decision context (the session tier: session_store).

Organisation: what every vigil instance of a team shares, read-only to the daemon, from a configured
folder (``policy.toml`` + ``*.md`` rubric files) or one file (``.toml`` policy or ``.md`` rubric).
Its caps can only tighten the instance's (``tighten``); its banned tickers are never traded. Re-read
only when a file changed (mtime and size), so a decision costs a few ``stat`` calls.

Project (this deployment, in the state dir): ``MEMORY.md`` - the first 200 lines are loaded (at
most 1 MiB of text); people write anything, the daemon writes ``- [auto DAY TICKER] text`` lines
under its own heading, newest first, one per day and ticker, at most 50, in a file of up to 8 MiB -
and ``rules/*.md`` whose front matter ``tickers: ["SOL/*", "*"]`` (glob patterns) says which
tickers a rule applies to (none: all).
"""

from __future__ import annotations

import fnmatch
import functools
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from core.jsonread import UnreadableJsonError, loads_json
from core.regular_file import open_regular_text, read_regular_text
from market.timeframes import normalized_ticker
from state.line_text import as_one_line
from state.merge_write import MergeConflictError, merge_write
from state.toml_file import read_toml

MEMORY_READ_LINES = 200
#: of those lines, at most this much text is read: one line of a sparse file was read whole
MEMORY_READ_CHARS = 1 << 20
#: a larger MEMORY.md gets no [auto] line: each line read it whole and wrote it all again
MEMORY_WRITE_MAX_BYTES = 8 << 20
#: the largest rule or organisation file read: a rule or a policy is a page, not a log
TIER_FILE_MAX_BYTES = 1 << 20
AUTO_ENTRIES_KEPT = 50
AUTO_HEADING = "## vigil (auto: newest first, one per day and ticker, 50 kept)"
_AUTO_LINE = re.compile(r"^- \[auto (\d{4}-\d{2}-\d{2}) ([^\]]+)\] ")


class TierError(Exception):
    """A tier could not be read; the assembler logs it and goes on without the tier."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class OrganisationPolicy(_Frozen):
    max_position_pct: float | None = Field(None, gt=0.0, le=1.0)
    max_total_exposure_pct: float | None = Field(None, gt=0.0, le=3.0)
    banned_tickers: tuple[str, ...] = ()
    rubric: str = ""  # how decisions are scored (the *.md files)
    text: str = ""  # anything else the policy file says, for the prompt

    @field_validator("banned_tickers")
    @classmethod
    def _tickers(cls, names: tuple[str, ...]) -> tuple[str, ...]:
        """Each a ticker as the caps compare it (``BTC/USDT``; ``btc/usdt`` and ``BTCUSDT`` are
        read so): ``SOL`` banned nothing, while the prompt told the model it was banned."""
        return tuple(_banned_ticker(name) for name in names)


def _banned_ticker(name: str) -> str:
    try:
        return normalized_ticker(name)
    except ValueError:
        raise ValueError(
            f"banned ticker {name!r} is not a ticker: write it as BASE/QUOTE (SOL/USDT)"
        ) from None


def tighten(instance: dict[str, float], policy: OrganisationPolicy) -> dict[str, float]:
    """The instance's caps with the organisation's applied: the smaller of the two, always."""
    out = dict(instance)
    for name in ("max_position_pct", "max_total_exposure_pct"):
        org = getattr(policy, name)
        if org is not None:
            out[name] = min(out.get(name, org), org)
    return out


def _stamp(paths: Sequence[Path]) -> tuple[tuple[str, int, int], ...]:
    out = []
    for path in paths:
        st = path.stat()
        out.append((str(path), st.st_mtime_ns, st.st_size))
    return tuple(out)


_LISTINGS: dict[tuple[Path, str], tuple[int, list[Path]]] = {}


def _listing(folder: Path, pattern: str, suffixes: tuple[str, ...]) -> list[Path]:
    """The folder's files with these suffixes, sorted; listed again only when the folder's mtime
    moved (a file added, removed or renamed), so a decision costs one ``stat`` here. Hidden
    names are an editor's (Emacs locks ``x.md`` with a dangling symlink ``.#x.md``): listed,
    they left the tier out, or refused the start, while a person edited a file."""
    mtime = folder.stat().st_mtime_ns
    found = _LISTINGS.get((folder, pattern))
    if found is None or found[0] != mtime:
        paths = sorted(
            p for p in folder.glob(pattern) if p.suffix in suffixes and not p.name.startswith(".")
        )
        found = _LISTINGS[(folder, pattern)] = (mtime, paths)
    return found[1]


class OrganisationTier:
    def __init__(self, source: Path | None) -> None:
        self.source = source
        self._cached: tuple[tuple[tuple[str, int, int], ...], OrganisationPolicy] | None = None
        self._had_toml = False  # the last policy read came from a .toml file

    def _files(self) -> list[Path]:
        assert self.source is not None
        if self.source.is_dir():
            return _listing(self.source, "*", (".toml", ".md"))
        if self.source.is_file():
            if self.source.suffix not in (".toml", ".md"):
                # read as a rubric, a policy.TOML or policy.txt had its caps and bans unapplied
                raise TierError(
                    f"organisation policy {self.source} is neither a .toml policy nor a .md rubric"
                )
            return [self.source]
        raise TierError(f"organisation policy {self.source} does not exist")

    def load(self) -> OrganisationPolicy | None:
        """None when no source is configured; ``TierError`` when it cannot be read."""
        if self.source is None:
            return None
        try:
            files = self._files()
            has_toml = any(path.suffix == ".toml" for path in files)
            if self._had_toml and not has_toml:
                # an editor's backup step (policy.toml moved to policy.toml~, then written) or
                # a checkout: the caps and bans went for good without a word
                raise TierError(
                    f"organisation policy {self.source} holds no .toml policy any more; the "
                    "last good one stays in force (a .toml without caps lifts them)"
                )
            stamp = _stamp(files)
            if self._cached is not None and self._cached[0] == stamp:
                return self._cached[1]
            policy = _read_policy(files)
        except (OSError, ValueError) as exc:
            # ValueError holds UnreadableTomlError (state.toml_file: every way tomllib refuses a
            # file, deep nesting included), ValidationError and UnicodeDecodeError (a rubric):
            # each escaped the organisation caps once and failed every decision
            raise TierError(f"organisation policy {self.source}: {exc}") from exc
        self._cached, self._had_toml = (stamp, policy), has_toml
        return policy


def _read_policy(files: Sequence[Path]) -> OrganisationPolicy:
    """The policy of every file: each ``.toml`` checked alone, then the smallest of their caps,
    all their banned tickers and all their texts (merged key by key, the last file's cap or
    banned list replaced the others': a second file loosened the first's cap, lifted its ban)."""
    parts: list[OrganisationPolicy] = []
    rubric = []
    for path in files:
        if path.suffix == ".toml":
            data = read_toml(path, "policy file", max_bytes=TIER_FILE_MAX_BYTES)
            data["text"] = str(data.get("text", ""))
            parts.append(OrganisationPolicy.model_validate(data))
        else:
            rubric.append(read_regular_text(path, max_bytes=TIER_FILE_MAX_BYTES).strip())
    return OrganisationPolicy(
        max_position_pct=_smallest(p.max_position_pct for p in parts),
        max_total_exposure_pct=_smallest(p.max_total_exposure_pct for p in parts),
        banned_tickers=tuple(dict.fromkeys(t for p in parts for t in p.banned_tickers)),
        rubric="\n\n".join(rubric),
        text="\n\n".join(p.text for p in parts if p.text),
    )


def _smallest(caps: Iterable[float | None]) -> float | None:
    return min((cap for cap in caps if cap is not None), default=None)


class Rule(_Frozen):
    name: str
    tickers: tuple[str, ...]
    text: str

    def applies_to(self, ticker: str) -> bool:
        return matches_any(self.tickers, ticker)


@functools.lru_cache(maxsize=1024)
def matches_any(patterns: tuple[str, ...], ticker: str) -> bool:
    """Whether ``ticker`` matches one of the glob ``patterns`` (remembered: every decision asks
    each rule about the same tickers)."""
    return any(fnmatch.fnmatchcase(ticker, pattern) for pattern in patterns)


def parse_rule(name: str, raw: str) -> Rule:
    """A rule file: optional front matter between ``---`` lines with ``tickers:`` as a JSON list
    (or one bare pattern); without it the rule applies to every ticker. Blank lines and ``#``
    comments in the front matter are skipped; any other key is a ``TierError``."""
    tickers: tuple[str, ...] = ("*",)
    # an editor's byte order mark and Windows line ends: the front matter went unseen, and the
    # rule applied to every ticker with its front matter as text
    raw = raw.removeprefix("\ufeff").replace("\r\n", "\n")
    body = raw
    # blank lines before it, or spaces after its ---: it was read as the rule's text, and the
    # rule applied to every ticker with its front matter sent to the model
    opening, _, after = raw.lstrip(" \t\n").partition("\n")
    if opening.rstrip() == "---":
        head, sep, rest = ("\n" + after).partition("\n---")
        if not sep:
            raise TierError(f"rule {name}: front matter is not closed with ---")
        body = rest.lstrip("-").lstrip(" \t").lstrip("\n")
        seen = False
        for line in head.splitlines():
            key, _, value = line.partition(":")
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            if key.strip() != "tickers":
                # a misspelt key (``ticker:``) silently made the rule apply to every ticker
                raise TierError(
                    f"rule {name}: unknown front matter {line.strip()!r} (only tickers)"
                )
            if seen:
                raise TierError(f"rule {name}: tickers is written twice (the last one won)")
            seen, tickers = True, _patterns(name, value.strip())
    return Rule(name=name, tickers=tickers, text=body.strip())


def _read_rule(path: Path) -> Rule:
    return parse_rule(path.stem, read_regular_text(path, max_bytes=TIER_FILE_MAX_BYTES))


def _patterns(name: str, value: str) -> tuple[str, ...]:
    """The patterns, in the tickers' upper case (``sol/usdt`` matched no ticker); a bare one
    without a trailing ``# comment`` (it was part of the pattern)."""
    if not value.startswith("["):
        value = re.split(r"\s#", value, maxsplit=1)[0].strip()
    if not value.strip("'\""):
        raise TierError(f"rule {name}: tickers is empty (leave the line out for every ticker)")
    if not value.startswith("[") and "," in value:
        # ``SOL/USDT, ETH/USDT`` was one pattern with a comma in it, matching no ticker
        raise TierError(
            f"rule {name}: tickers {value!r} is not one pattern; several are written as a JSON "
            'list, e.g. ["SOL/USDT", "ETH/*"]'
        )
    try:
        parsed = loads_json(value) if value.startswith("[") else [value.strip("'\"")]
    except UnreadableJsonError as exc:
        # json's own limits too (a number too long, nesting too deep): they escaped the tier
        # and cost the decision its whole context instead of this one tier
        raise TierError(f"rule {name}: tickers is not a list: {exc}") from None
    if not isinstance(parsed, list) or not all(isinstance(p, str) for p in parsed):
        raise TierError(f"rule {name}: tickers must be a list of glob patterns")
    if not parsed or not all(p.strip() for p in parsed):
        raise TierError(f"rule {name}: tickers is empty (leave the line out for every ticker)")
    return tuple(p.strip().upper() for p in parsed)


class ProjectTier:
    def __init__(
        self,
        state_dir: Path,
        *,
        recheck_secs: float = 0.0,
        real_secs: Callable[[], float] | None = None,
    ) -> None:
        """``recheck_secs`` with ``real_secs`` (a real monotonic clock, not the simulated one):
        MEMORY.md and the rules folder are looked at (``stat``) at most once in that much real
        time, so a person's edit is seen within ``recheck_secs``. The daemon decides minutes
        apart and looks every time; a replay decides every few milliseconds, and its two ``stat``
        calls were ~20 us of CPU a decision. The tier's own write (``remember``) is seen at once."""
        self.memory_path = state_dir / "MEMORY.md"
        self.rules_dir = state_dir / "rules"
        self._notes: tuple[tuple[int, int] | None, str] | None = None  # stamp None: no file
        self._rules: tuple[tuple[tuple[str, int, int], ...], list[Rule]] | None = None
        self._recheck = recheck_secs
        self._real_secs = real_secs
        self._looked: dict[str, float] = {}  # "notes" / "rules" -> real time last looked at

    def _looked_lately(self, what: str) -> bool:
        """Whether ``what`` was looked at less than ``recheck_secs`` ago (if not: it is now)."""
        if self._real_secs is None:
            return False
        now = self._real_secs()
        last = self._looked.get(what)
        if last is not None and now - last < self._recheck:
            return True
        self._looked[what] = now
        return False

    def notes(self) -> str:
        """The first 200 lines of MEMORY.md ('' when there is none); re-read when it changed."""
        if self._looked_lately("notes") and self._notes is not None:
            return self._notes[1]
        known, self._notes = self._notes, None  # kept once this look succeeds: a failure repeats
        try:
            st = self.memory_path.stat()
        except FileNotFoundError:
            self._notes = (None, "")
            return ""
        except OSError as exc:
            raise TierError(f"{self.memory_path}: {exc}") from exc
        stamp = (st.st_mtime_ns, st.st_size)
        if known is None or known[0] != stamp:
            known = (stamp, self._read_notes())
        self._notes = known
        return known[1]

    def _read_notes(self) -> str:
        try:
            with open_regular_text(self.memory_path, encoding="utf-8-sig") as fh:
                lines: list[str] = []
                left = MEMORY_READ_CHARS
                while len(lines) < MEMORY_READ_LINES and left > 0:
                    line = fh.readline(left)  # never more than what is left: a line may not end
                    if not line:
                        break
                    lines.append(line)
                    left -= len(line)
        except FileNotFoundError:
            return ""
        except (OSError, UnicodeDecodeError) as exc:
            raise TierError(f"{self.memory_path}: {exc}") from exc
        return "".join(lines).strip()

    def rules(self) -> list[Rule]:
        """Every rule file, parsed; re-read when a file was added, removed or changed."""
        if self._looked_lately("rules") and self._rules is not None:
            return self._rules[1]
        known, self._rules = self._rules, None  # kept once this look succeeds: a failure repeats
        if not self.rules_dir.is_dir():
            self._rules = ((), [])  # an empty folder's stamp: a folder made later is read
            return []
        try:
            paths = _listing(self.rules_dir, "*.md", (".md",))
            stamp = _stamp(paths)
            if known is None or known[0] != stamp:
                known = (stamp, [_read_rule(p) for p in paths])
        except (OSError, UnicodeDecodeError) as exc:
            raise TierError(f"{self.rules_dir}: {exc}") from exc
        self._rules = known
        return known[1]

    def rules_for(self, ticker: str) -> list[Rule]:
        return [rule for rule in self.rules() if rule.applies_to(ticker)]

    def remember(self, day: str, ticker: str, text: str) -> None:
        """The daemon's write-back: one ``[auto]`` line per day and ticker (a newer one replaces
        it), newest first under the daemon's heading, the oldest dropped beyond 50. Lines people
        wrote are kept as they are, and so is a save of theirs landing while this writes (merged
        again, ``state.merge_write``). A file that cannot be read or written: ``TierError``."""
        # a model's words: its ESC or NUL ran on the terminal of a person reading the file
        line = f"- [auto {day} {ticker}] {as_one_line(' '.join(text.split()))[:300]}"
        self._notes = None  # the next ``notes`` looks at the file, however lately it looked
        self._check_size()
        merge = functools.partial(_with_auto_line, day=day, ticker=ticker, line=line)
        try:
            merge_write(self.memory_path, merge)
        except UnicodeDecodeError as exc:  # a person's file we cannot read: left alone
            raise TierError(
                f"{self.memory_path}: {exc}; left as it is, its [auto] line not written"
            ) from exc
        except (OSError, MergeConflictError) as exc:
            raise TierError(f"{self.memory_path}: its [auto] line not written: {exc}") from exc

    def _check_size(self) -> None:
        try:
            size = self.memory_path.stat().st_size
        except FileNotFoundError:
            return
        except OSError as exc:
            raise TierError(f"{self.memory_path}: its [auto] line not written: {exc}") from exc
        if size > MEMORY_WRITE_MAX_BYTES:
            raise TierError(
                f"{self.memory_path}: {size:,} bytes, over the {MEMORY_WRITE_MAX_BYTES:,} the "
                "write-back rewrites; left as it is, its [auto] line not written"
            )


def _with_auto_line(raw: bytes | None, *, day: str, ticker: str, line: str) -> bytes:
    """MEMORY.md (``raw``; None: no file yet) with ``line`` as the day's and ticker's ``[auto]``
    line; ``UnicodeDecodeError`` when it is not UTF-8."""
    newline, mark = "\n", ""
    if raw is None:
        existing = ["# MEMORY", ""]
    else:
        text = raw.decode("utf-8")
        # an editor's byte order mark hid the title behind it; the mark is put back first
        mark = "\ufeff" if text.startswith("\ufeff") else ""
        text = text.removeprefix(mark)
        newline, existing = _lines(text)
    auto = [ln for ln in existing if _AUTO_LINE.match(ln)]
    people = [ln for ln in existing if not _AUTO_LINE.match(ln) and ln != AUTO_HEADING]
    auto = [ln for ln in auto if _AUTO_LINE.match(ln).groups() != (day, ticker)]  # type: ignore[union-attr]
    auto = sorted([line, *auto], key=_auto_day, reverse=True)[:AUTO_ENTRIES_KEPT]
    title = people[:1] if people and people[0].startswith("# ") else []
    # the person's lines as they are: only the blank lines around the [auto] block are the
    # rewrite's (one each side); runs of blank lines, trailing spaces and lone CRs inside a line
    # of theirs were squeezed, stripped and split before
    rest = people[len(title) :]
    while rest and not rest[0].strip():
        rest.pop(0)
    while rest and rest[-1] == "":
        rest.pop()  # the file's final line end, written again below
    lines = [*title, *([""] if title else []), AUTO_HEADING, *auto, *([""] if rest else []), *rest]
    return (mark + newline.join(lines) + newline).encode()


def _lines(text: str) -> tuple[str, list[str]]:
    """The file's line end and its lines, split at that line end only: a file edited on Windows
    stays CRLF, an old Mac one CR, and a CR inside a line of an LF file stays in it
    (``splitlines()`` also splits at form feeds, U+2028 and the like)."""
    if "\r\n" in text:
        return "\r\n", text.replace("\r\n", "\n").split("\n")
    if "\n" in text:
        return "\n", text.split("\n")
    if "\r" in text:
        return "\r", text.split("\r")
    return "\n", [text]


def _auto_day(line: str) -> str:
    match = _AUTO_LINE.match(line)
    return match.group(1) if match else ""
