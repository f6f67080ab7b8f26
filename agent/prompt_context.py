"""The non-snapshot context as the prompt's texts, within its budgets.

Each memory item is cut to ``item_chars``, each class of items trimmed to its own budget
(``class_chars``), then the whole to ``context_max_chars`` (``agent.prompt_trim``).
``context_parts`` does every step on every item. ``ContextMemo`` gives the same answer with the
stable classes (the organisation's caps and policy, the rules, the day summaries, the notes) done
once per change of what they are made of: from one decision to the next they are the same, and
only the lessons and the session entries have to be done again.
"""

from __future__ import annotations

import bisect
import operator
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from agent.memo import remember
from agent.prompt_budgets import PromptBudgets
from agent.prompt_items import stable_items, volatile_items
from agent.prompt_trim import SEPARATOR_CHARS, Item, cap_item, size, trim
from memory.context import AssembledContext, SummaryItem

#: the class budget each drop rank counts against (rules share the policy's)
RANK_CLASS = {0: "insight", 1: "summary", 2: "session", 3: "notes", 4: "policy", 5: "policy"}


#: the texts the prompt is made of, each the kept items that pass its test, joined by newlines
TEXTS = ("policy", "memory", "session", "stable_memory", "volatile")


def _text_lists(kept: Iterable[Item]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {name: [] for name in TEXTS}
    for item in kept:
        lesson = item.key.startswith("insight:")
        if item.part == "policy":
            out["policy"].append(item.text)
        elif item.part == "memory":
            out["memory"].append(item.text)
            if not lesson:
                out["stable_memory"].append(item.text)
        elif item.part == "session":
            out["session"].append(item.text)
        if lesson or item.part == "session":
            out["volatile"].append(item.text)
    return out


@dataclass(frozen=True)
class ContextParts:
    """The context as the prompt sends it and the journal line reports it."""

    texts: Mapping[str, str]  # each of ``TEXTS``
    chars: int  # of the kept items
    classed_chars: int  # after the class budgets, before the hard cap
    trimmed: tuple[str, ...]  # keys of the dropped items, the first to go first
    cut: tuple[str, ...]  # keys of the items cut to ``item_chars``
    over_budget: bool


def _drop_rank(item: Item) -> tuple[float, float, str]:
    return item.drop_rank


def _capped(items: Iterable[Item], item_chars: int) -> tuple[list[Item], list[str]]:
    out: list[Item] = []
    cut: list[str] = []
    for item in items:
        capped, was_cut = cap_item(item, item_chars) if item.part == "memory" else (item, False)
        out.append(capped)
        if was_cut:
            cut.append(item.key)
    return out, cut


def within_class_budgets(
    items: Sequence[Item], class_chars: Mapping[str, int]
) -> tuple[list[Item], list[Item]]:
    """Each class of unprotected items trimmed to its own budget, by its own drop order (drop
    rank, then place); the kept items in prompt order, and the dropped (class by class, each in
    its drop order). One pass over the items and one sort per class over budget, sizes counted
    once: ``ContextMemo`` runs it on the lessons and session entries at every decision."""
    groups: dict[str, list[Item]] = {}
    for item in items:
        if not item.protected:
            name = RANK_CLASS.get(int(item.drop_rank[0]), "")
            group = groups.get(name)
            if group is None:
                groups[name] = [item]
            else:
                group.append(item)
    dropped: list[Item] = []
    for name, group in groups.items():
        budget = class_chars.get(name)
        if budget is None:
            continue
        total = sum(len(item.text) for item in group) + SEPARATOR_CHARS * len(group)
        if total <= budget:
            continue
        for index in sorted(range(len(group)), key=lambda i: (group[i].drop_rank, i)):
            if total <= budget:
                break
            dropped.append(group[index])
            total -= len(group[index].text) + SEPARATOR_CHARS
    if not dropped:
        return list(items), dropped
    gone = {id(item) for item in dropped}
    return [item for item in items if id(item) not in gone], dropped


def context_parts(items: Sequence[Item], budgets: PromptBudgets) -> ContextParts:
    """Every step on every item: the answer ``ContextMemo`` must give."""
    capped, cut = _capped(items, budgets.item_chars)
    kept, class_dropped = within_class_budgets(capped, budgets.class_chars)
    result = trim(kept, budgets.context_max_chars)
    lists = _text_lists(result.kept)
    return ContextParts(
        texts={name: "\n".join(lists[name]) for name in TEXTS},
        chars=result.chars,
        classed_chars=size(kept),
        trimmed=tuple(i.key for i in sorted((*class_dropped, *result.dropped), key=_drop_rank)),
        cut=tuple(cut),
        over_budget=result.over_budget,
    )


@dataclass(frozen=True)
class _Stable:
    """The stable classes done: kept items (prompt order), the dropped ones' keys and ranks
    (drop order), the keys of the items cut, and the texts."""

    kept: tuple[Item, ...]
    trimmed: tuple[str, ...]
    ranks: tuple[tuple[float, float, str], ...]
    cut: tuple[str, ...]
    chars: int
    lists: Mapping[str, list[str]]
    joined: Mapping[str, str]  # each of ``lists`` joined by newlines


_SUMMARY_FIELDS = operator.attrgetter("analyst", "ticker", "kind", "text", "made_at_ms")


def stable_key(
    ctx: AssembledContext, summaries: tuple[object, ...] | None = None
) -> tuple[object, ...]:
    """Everything ``stable_items`` reads, as it reads it (a cap as its ``:g`` text);
    ``summaries``: ``summaries_key(ctx.summaries)`` when the caller has it."""
    values = ctx.values
    return (
        tuple((name, format(value, "g")) for name, value in ctx.caps.items()),
        ctx.banned_tickers,
        values.get("policy"),
        values.get("rubric"),
        values.get("notes"),
        values.get("person_notes"),
        tuple((name, tuple(texts)) for name, texts in ctx.rules.items()),
        tuple((name, tuple(tickers)) for name, tickers in ctx.rule_tickers.items()),
        summaries_key(ctx.summaries) if summaries is None else summaries,
    )


def summaries_key(summaries: Iterable[SummaryItem]) -> tuple[object, ...]:
    return tuple(map(_SUMMARY_FIELDS, summaries))


def _joined(stable: _Stable, name: str, more: list[str]) -> str:
    """``"\n".join(stable.lists[name] + more)``, the stable lines joined once."""
    if not more:
        return stable.joined[name]
    if not stable.lists[name]:
        return "\n".join(more)
    return stable.joined[name] + "\n" + "\n".join(more)


def _merged(stable: _Stable, dropped: Iterable[Item]) -> tuple[str, ...]:
    """The keys of ``sorted((*stable's dropped, *dropped), key=_drop_rank)``, the stable ones
    in order already: each of the few others goes after the ranks equal to its own, as the
    (stable) sort puts it."""
    keys = list(stable.trimmed)
    ranks = list(stable.ranks)
    for item in sorted(dropped, key=_drop_rank):
        at = bisect.bisect_right(ranks, item.drop_rank)
        ranks.insert(at, item.drop_rank)
        keys.insert(at, item.key)
    return tuple(keys)


class ContextMemo:
    """``context_parts(context_items(ctx), budgets)``, the stable classes done once per change.

    The stable items come first in prompt order and their classes (policy, summary, notes) are
    not the lessons' or the session's, so the class budgets trim the two lists apart; when the
    whole fits the hard cap (it does unless the class budgets were raised) nothing else goes."""

    def __init__(self, budgets: PromptBudgets, size_limit: int = 4) -> None:
        self.budgets = budgets
        self._size = size_limit
        self._stable: dict[tuple[object, ...], _Stable] = {}
        self._cuts: dict[str, str] = {}  # a lesson's text -> its cut
        #: the last summaries and their key: the desk hands out the same (frozen) items all day
        self._summaries: tuple[list[SummaryItem], tuple[object, ...]] = ([], ())
        self._last: tuple[tuple[object, ...], _Stable] | None = None  # the last key, its answer

    def parts(self, ctx: AssembledContext) -> ContextParts:
        b = self.budgets
        stable = self._stable_part(ctx)
        capped, cut = self._capped_volatile(volatile_items(ctx))
        kept, dropped = within_class_budgets(capped, b.class_chars)
        classed = stable.chars + size(kept)
        if classed > b.context_max_chars:  # the hard cap binds: every step on the whole
            return context_parts([*stable_items(ctx), *volatile_items(ctx)], b)
        lists = _text_lists(kept)
        return ContextParts(
            texts={name: _joined(stable, name, lists[name]) for name in TEXTS},
            chars=classed,
            classed_chars=classed,
            trimmed=_merged(stable, dropped) if dropped else stable.trimmed,
            cut=stable.cut + tuple(cut),
            over_budget=False,
        )

    def _summaries_key(self, summaries: list[SummaryItem]) -> tuple[object, ...]:
        last, key = self._summaries
        if len(last) != len(summaries) or not all(map(operator.is_, last, summaries)):
            key = summaries_key(summaries)
            self._summaries = (list(summaries), key)
        return key

    def _stable_part(self, ctx: AssembledContext) -> _Stable:
        key = stable_key(ctx, self._summaries_key(ctx.summaries))
        last = self._last
        # the key of the decision before, compared (its parts the very same strings and tuples,
        # mostly: no hash of the ~150 parts, which a tuple does not keep, to look it up)
        if last is not None and last[0] == key:
            return last[1]
        found = self._stable.get(key)
        if found is None:
            capped, cut = _capped(stable_items(ctx), self.budgets.item_chars)
            kept, dropped = within_class_budgets(capped, self.budgets.class_chars)
            gone = sorted(dropped, key=_drop_rank)
            lists = _text_lists(kept)
            found = _Stable(
                kept=tuple(kept),
                trimmed=tuple(i.key for i in gone),
                ranks=tuple(i.drop_rank for i in gone),
                cut=tuple(cut),
                chars=size(kept),
                lists=lists,
                joined={name: "\n".join(lists[name]) for name in TEXTS},
            )
            remember(self._stable, key, found, self._size)
        self._last = (key, found)
        return found

    def _capped_volatile(self, items: Iterable[Item]) -> tuple[list[Item], list[str]]:
        """``_capped``, each text's cut remembered: a lesson is cut the same way every time
        (its score, and so its rank, moves from one decision to the next; its text does not)."""
        out: list[Item] = []
        cut: list[str] = []
        limit = self.budgets.item_chars
        for item in items:
            if item.part == "memory" and not item.protected and len(item.text) > limit:
                text = self._cuts.get(item.text)
                if text is None:
                    text = cap_item(item, limit)[0].text
                    remember(self._cuts, item.text, text, 1024)
                out.append(Item(item.part, item.key, text, item.protected, item.drop_rank))
                cut.append(item.key)
            else:
                out.append(item)
        return out, cut
