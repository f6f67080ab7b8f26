"""Day summaries of an analyst's reports: representatives, then model -> numbers -> concatenation.

Representatives: the lookback's reports de-duplicated by cosine similarity of their wording (numbers
rounded to two significant digits, so two reports of the same picture count as one), then 3-5 kept,
evenly spread over time. A summary is Markdown with the sections *Key trends / Key events / Risk
factors / Signal strength*, at most 1,000 characters. The chain: a model summary when a summariser
is wired and answers valid text; else a deterministic summary from the reports' figures; else (no
figures at all, or the builder failed) the seed's plain concatenation cut at a sentence boundary.
Each ``DaySummary`` records which path made it and why a step was skipped.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import operator
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any, NamedTuple, Protocol

from pydantic import BaseModel, ConfigDict

from memory.analyst_model import AnalystName, AnalystReport, DaySummary, Session, SignalStrength
from memory.greedy_passes import GreedyPasses, sort_key
from state.line_text import terminal_safe_lines
from state.memory_clip import clip_memory

log = logging.getLogger(__name__)

SUMMARY_MIN_CHARS = 500
SUMMARY_MAX_CHARS = 1000
SECTIONS = ("Key trends", "Key events", "Risk factors", "Signal strength")
DUPLICATE_COSINE = 0.9
MIN_REPRESENTATIVES, MAX_REPRESENTATIVES = 3, 5
_TOKEN = re.compile(r"[A-Za-z_%&/]+|-?\d+(?:[.,]\d+)*")


class SummaryRequest(BaseModel):
    """What one analyst's model call sees: its own reports, nothing of another analyst."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    analyst: AnalystName
    ticker: str
    day: str
    session: Session
    reports: tuple[AnalystReport, ...]


class ModelSummariser(Protocol):
    async def summarise(self, request: SummaryRequest) -> str:
        """Markdown with the four sections; raises when no valid summary came back."""
        ...


class SummaryInvalid(ValueError):
    pass


class ModelNotAsked(Exception):
    """The model was not asked (the day's budget is spent): its summariser says why, once a
    budget day, and the summary falls back to the numbers without a warning of its own."""


def _tokens(text: str) -> Counter[str]:
    """Each word as it is, each number as its value to two significant digits, counted.

    Tokens hold no whitespace, so the text's tokens are its whitespace-separated chunks' tokens
    in turn, and a report's chunks ("rsi", "1h", "-0.13") mostly recur: each chunk's keys are
    remembered (the regex over a whole report cost about half its tokenising)."""
    get = _chunk_keys.get
    chunks = [k if (k := get(c)) is not None else _chunk(c) for c in text.lower().split()]
    return Counter(itertools.chain.from_iterable(chunks))


#: chunk -> its tokens' keys (a token that is not a number after all is left out)
_CHUNK_KEYS_KEPT = 65536
_chunk_keys: dict[str, tuple[str, ...]] = {}


def _chunk(chunk: str) -> tuple[str, ...]:
    keys = tuple(filter(None, map(_token_key, _TOKEN.findall(chunk))))
    if len(_chunk_keys) >= _CHUNK_KEYS_KEPT:
        _chunk_keys.clear()
    _chunk_keys[chunk] = keys
    return keys


def _token_key(token: str) -> str:
    """A number's value to two significant digits ("": not a number after all), a word as is."""
    if token[0].isdigit() or token[0] == "-":
        try:
            return f"{float(token.replace(',', '')):.2g}"
        except ValueError:
            return ""
    return token


def cosine(a: Counter[str], b: Counter[str]) -> float:
    return _cosine(_Bag(a, _norm(a)), _Bag(b, _norm(b)))


class _Bag(NamedTuple):
    counts: Counter[str]
    norm: float


def _norm(counts: Counter[str]) -> float:
    return math.sqrt(sum(c * c for c in counts.values()))


def _cosine(a: _Bag, b: _Bag) -> float:
    """``cosine`` with each side's norm made once (the same float operations, the same value).
    The counts are integers, so the dot product is exact in any order: over the other's words,
    a word of its own missing counting 0 (no set of the shared words made)."""
    other = b.counts
    dot = sum(map(operator.mul, map(a.counts.get, other, itertools.repeat(0)), other.values()))
    norm = a.norm * b.norm
    return dot / norm if norm else 0.0


#: a day's summaries read every report of their lookback again: each report's words once
_BAGS_KEPT = 4096
_bags: dict[str, _Bag] = {}


def _bag(text: str) -> _Bag:
    bag = _bags.get(text)
    if bag is None:
        counts = _tokens(text)
        bag = _Bag(counts, _norm(counts))
        if len(_bags) >= _BAGS_KEPT:  # the older half goes in one go (dropping the oldest one
            # at a time made each drop step over the slots of those dropped before)
            for old in list(itertools.islice(_bags, _BAGS_KEPT // 2)):
                del _bags[old]
        _bags[text] = bag
    return bag


def _distinct(bag: _Bag, kept: Sequence[_Bag]) -> bool:
    """Not a duplicate of any kept report. Newest first: a report mostly repeats a recent one,
    and ``all`` is the same either way."""
    return all(_cosine(bag, other) < DUPLICATE_COSINE for other in reversed(kept))


#: the greedy passes walked ahead (``learn_wording``) that ``_representatives`` resumes
_passes: GreedyPasses[_Bag] = GreedyPasses(_bag, _distinct)


def learn_wording(reports: Iterable[AnalystReport]) -> None:
    """Tokenise the reports' wording now and walk their day's greedy pass, as
    ``representatives`` will (the same memos, so the same answers): a process with time between
    decisions spares the next roll the work."""
    for report in reports:
        _passes.extend(report)


#: the last call's reports and its answer as positions among them: yesterday's post_close and
#: today's pre_open summarise the same reports (read back as other objects, equal ones)
_last_representatives: list[tuple[tuple[AnalystReport, ...], list[int]]] = []


def representatives(reports: Sequence[AnalystReport]) -> list[AnalystReport]:
    """3-5 distinct reports (fewer when there are fewer), oldest first, of the call's own
    objects. A pure function of the reports: the same reports (equal, field by field) as the
    last call get its answer again."""
    key = tuple(reports)
    if _last_representatives and _last_representatives[0][0] == key:
        return [key[at] for at in _last_representatives[0][1]]
    chosen = _representatives(key)
    where = {id(report): at for at, report in enumerate(key)}
    _last_representatives[:] = [(key, [where[id(report)] for report in chosen])]
    return chosen


def _representatives(reports: Sequence[AnalystReport]) -> list[AnalystReport]:
    ordered = sorted(reports, key=sort_key)
    # the pass over the longest prefix walked ahead, if any, then on over the rest
    start, kept, bags = _passes.resume(ordered)
    for at in range(start, len(ordered)):
        bag = _bag(ordered[at].content)
        if _distinct(bag, bags):
            kept.append(at)
            bags.append(bag)
    distinct = [ordered[at] for at in kept]
    if len(distinct) > MAX_REPRESENTATIVES:
        step = (len(distinct) - 1) / (MAX_REPRESENTATIVES - 1)
        distinct = [distinct[round(i * step)] for i in range(MAX_REPRESENTATIVES)]
    elif len(distinct) < MIN_REPRESENTATIVES:
        extra = [r for r in reversed(ordered) if r not in distinct]
        distinct += extra[: MIN_REPRESENTATIVES - len(distinct)]
    return sorted(distinct, key=sort_key)


def signal_strength(reports: Sequence[AnalystReport]) -> SignalStrength:
    mean = sum(r.confidence for r in reports) / len(reports)
    return "high" if mean >= 0.7 else "medium" if mean >= 0.45 else "low"


#: \W+ alone: blanks are \W too, and \W+\s* split a run of them every way there is (time
#: quadratic in the run: a model's answer padded with blanks froze the loop for seconds)
_STRENGTH = re.compile(r"signal strength\W+(high|medium|low)", re.IGNORECASE)


def check_summary(text: str) -> str:
    """A model's summary as kept: the four sections present, at most 1,000 characters, each
    control character but its line breaks written as its escape (as a lesson's are: the text is
    sent in every later prompt and shown by the listings)."""
    missing = [s for s in SECTIONS if s.lower() not in text.lower()]
    if missing:
        raise SummaryInvalid(f"summary lacks sections: {', '.join(missing)}")
    if _STRENGTH.search(text) is None:
        raise SummaryInvalid("signal strength is not high, medium or low")
    return clip_memory(terminal_safe_lines(text.strip()), SUMMARY_MAX_CHARS)


def _trend_lines(reports: Sequence[AnalystReport]) -> list[str]:
    first, last = reports[0], reports[-1]
    lines: list[str] = []
    for name, end in last.figures.items():
        start = first.figures.get(name)
        if end is None or start is None or len(lines) >= 4:
            continue
        change = f" ({(end - start) / abs(start) * 100:+.1f} %)" if start else ""
        lines.append(f"{name} {_short(start)} -> {_short(end)}{change}")
    for name, label in last.labels.items():
        seen = Counter(r.labels.get(name) for r in reports if r.labels.get(name))
        lines.append(f"{name}: {label} ({seen[label]} of {len(reports)} reports)")
    return lines[:6]


def _short(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 1000 else f"{value:.4g}"


def _event_lines(reports: Sequence[AnalystReport]) -> list[str]:
    events = []
    for before, after in itertools.pairwise(reports):
        for name, label in after.labels.items():
            if before.labels.get(name) not in (None, label):
                events.append(f"{name} {before.labels[name]} -> {label} on {after.day}")
    if not events:
        biggest = max(
            reports, key=lambda r: abs(r.figures.get("return_zscore") or 0.0), default=None
        )
        if biggest is not None and biggest.figures.get("return_zscore"):
            events.append(
                f"largest move z {biggest.figures['return_zscore']:+.2f} on {biggest.day}"
            )
    return events[:4] or ["no label changes in the period"]


def _risk_lines(reports: Sequence[AnalystReport]) -> list[str]:
    last = reports[-1].figures
    risks = []
    checks: tuple[tuple[str, Callable[[float], bool], str], ...] = (
        ("return_zscore", lambda v: abs(v) >= 2, "return z-score {v:+.2f}"),
        ("rsi_1h", lambda v: v >= 70 or v <= 30, "1h RSI {v:.0f}"),
        ("funding_pct", lambda v: abs(v) >= 0.05, "funding {v:+.4f} % per 8 h"),
        ("fear_greed", lambda v: v <= 25 or v >= 75, "Fear & Greed {v:.0f}"),
        ("exposure_scale", lambda v: v < 0.8, "exposure scaled to {v:.2f}"),
    )
    for name, flagged, text in checks:
        value = last.get(name)
        if value is not None and flagged(value):
            risks.append(text.format(v=value))
    missing = sorted(k for k, v in last.items() if v is None)
    if missing:
        risks.append("unavailable: " + ", ".join(missing[:5]))
    return risks or ["none flagged by the figures"]


def deterministic_summary(
    analyst: str, ticker: str, session: Session, reports: Sequence[AnalystReport]
) -> tuple[str, SignalStrength]:
    """From the reports' numbers and labels; raises ``SummaryInvalid`` when they hold none."""
    if not any(any(v is not None for v in r.figures.values()) or r.labels for r in reports):
        raise SummaryInvalid("the reports hold no figures")
    strength = signal_strength(reports)
    head = f"{analyst} {ticker}, {session.replace('_', '-')}, {reports[0].day}..{reports[-1].day}"
    body = [
        f"### {head}",
        "**Key trends**: " + "; ".join(_trend_lines(reports)),
        "**Key events**: " + "; ".join(_event_lines(reports)),
        "**Risk factors**: " + "; ".join(_risk_lines(reports)),
        f"**Signal strength**: {strength} (mean confidence "
        f"{sum(r.confidence for r in reports) / len(reports):.2f}, {len(reports)} reports)",
    ]
    text = "\n".join(body)
    for report in reversed(reports):  # the newest words, while there is room for them
        if len(text) >= SUMMARY_MIN_CHARS:
            break
        text += f"\n- {report.content}"
    return clip_memory(text, SUMMARY_MAX_CHARS), strength


def concatenation(reports: Sequence[AnalystReport]) -> str:
    """The seed's last resort: the reports' text, cut at a sentence boundary."""
    return clip_memory(" ".join(r.content for r in reports), SUMMARY_MAX_CHARS)


async def make_summary(
    request: SummaryRequest, *, now_ms: int, model: ModelSummariser | None
) -> DaySummary:
    """The chain; ``request.reports`` are the lookback's reports (representatives chosen here)."""
    reps = representatives(request.reports)
    ids = tuple(r.report_id for r in reps)
    base: dict[str, Any] = {
        "analyst": request.analyst,
        "ticker": request.ticker,
        "day": request.day,
    }
    base |= {"session": request.session, "report_ids": ids, "made_at_ms": now_ms}
    skipped = []
    if model is not None and reps:
        try:
            text = check_summary(
                await model.summarise(request.model_copy(update={"reports": tuple(reps)}))
            )
            strength = _strength_in(text)
            return DaySummary(**base, text=text, path="model", signal_strength=strength)
        except asyncio.CancelledError:
            raise
        except ModelNotAsked as exc:  # said by the summariser: each summary said it again
            skipped.append(f"model: not asked: {exc}")
        except Exception as exc:
            log.warning("%s summary by the model failed: %s", request.analyst, exc)
            skipped.append(f"model: {type(exc).__name__}: {str(exc)[:160]}")
    elif model is None:
        skipped.append("model: no summariser (no API key or budget)")
    if not reps:
        return DaySummary(
            **base,
            text="",
            path="concatenation",
            signal_strength=None,
            detail="; ".join([*skipped, "no reports in the lookback"]),
        )
    try:
        text, strength = deterministic_summary(
            request.analyst, request.ticker, request.session, reps
        )
        return DaySummary(
            **base,
            text=text,
            path="deterministic",
            signal_strength=strength,
            detail="; ".join(skipped),
        )
    except SummaryInvalid as exc:
        skipped.append(f"deterministic: {exc}")
    return DaySummary(
        **base,
        text=concatenation(reps),
        path="concatenation",
        signal_strength=None,
        detail="; ".join(skipped),
    )


def _strength_in(text: str) -> SignalStrength:
    found = _STRENGTH.search(text)
    assert found is not None  # check_summary made sure
    value = found.group(1).lower()
    return "high" if value == "high" else "medium" if value == "medium" else "low"
