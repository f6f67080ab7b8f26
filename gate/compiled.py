"""Wake conditions compiled for the hot path: checked on every tick, built once per agent update.

A level operator becomes one C-level call (``functools.partial`` over ``operator``), so checking a
condition allocates nothing. A crossing operator keeps the previously observed value and holds
when that value was on the other side of the threshold (or on it) and the current one is past it:
``crosses_above`` is ``previous <= threshold < current``. The first observation only sets the
baseline, it never counts as a cross.

The gate decides when an observation becomes the new baseline (``commit``): during the cooldown
it does not, so a cross that happens while the gate cannot pass is still seen when the cooldown
ends, as long as the value is still across.
"""

from __future__ import annotations

import functools
import operator
from collections.abc import Callable, Sequence
from typing import Final

from gate.conditions import Operator, WakeCondition

#: outcomes of ``CompiledConditions.check``
QUIET: Final = 0
HELD: Final = 1
UNAVAILABLE: Final = 2  # nothing held and at least one metric had no value


def _level_test(op: Operator, threshold: float) -> Callable[[float], bool]:
    """``value <op> threshold`` as a C-level callable (the operands are flipped for partial)."""
    if op is Operator.LT:
        return functools.partial(operator.gt, threshold)  # threshold > value
    if op is Operator.LTE:
        return functools.partial(operator.ge, threshold)
    if op is Operator.GT:
        return functools.partial(operator.lt, threshold)
    if op is Operator.GTE:
        return functools.partial(operator.le, threshold)
    negative = -threshold
    if op is Operator.ABS_GT:
        return lambda value: value > threshold or value < negative
    if op is Operator.ABS_LT:
        return lambda value: negative < value < threshold
    raise ValueError(f"{op} is not a level operator")


class CompiledCondition:
    """One condition plus its per-tick state (the crossing baseline, whether it held last check)."""

    __slots__ = (
        "condition",
        "crossing",
        "held",
        "metric",
        "previous",
        "test",
        "threshold",
        "unavailable",
        "wake_reason",
    )

    def __init__(self, condition: WakeCondition, previous: float | None = None) -> None:
        self.condition = condition
        self.metric = condition.metric
        self.threshold = condition.threshold
        op = condition.operator
        # +1 crosses above, -1 crosses below, 0 a level test
        self.crossing = {Operator.CROSSES_ABOVE: 1, Operator.CROSSES_BELOW: -1}.get(op, 0)
        self.test = _level_test(op, condition.threshold) if self.crossing == 0 else None
        self.previous = previous
        self.held = False  # crossing conditions only: whether the last check saw a cross
        self.unavailable = 0  # checks that found no value for the metric
        self.wake_reason = "wake:" + condition.describe()

    def key(self) -> tuple[str, Operator, float]:
        return (self.metric, self.condition.operator, self.threshold)


class CompiledConditions:
    """A set of conditions ready for ``check``: level ones as ``(metric, test, condition)``
    tuples (unpacked, not attribute-loaded, per tick), crossing ones as objects with state."""

    __slots__ = ("all", "crossings", "levels")

    def __init__(
        self, conditions: Sequence[WakeCondition], carry_from: CompiledConditions | None = None
    ) -> None:
        # a crossing condition the agent sets again keeps its baseline
        baselines: dict[tuple[str, Operator, float], float | None] = {}
        if carry_from is not None:
            baselines = {c.key(): c.previous for c in carry_from.crossings}
        compiled = [CompiledCondition(condition) for condition in conditions]
        for c in compiled:
            if c.crossing:
                c.previous = baselines.get(c.key())
        self.all: tuple[CompiledCondition, ...] = tuple(compiled)
        self.levels: tuple[tuple[str, Callable[[float], bool], CompiledCondition], ...] = tuple(
            (c.metric, c.test, c) for c in compiled if c.test is not None
        )
        self.crossings: tuple[CompiledCondition, ...] = tuple(c for c in compiled if c.crossing)

    def check(self, get: Callable[[str], float | None], commit: bool) -> int:
        """HELD, UNAVAILABLE or QUIET for the current values from ``get``.

        A missing or NaN value does not hold and is counted on its condition. ``commit`` makes
        this observation the crossing baseline (a condition without a baseline always takes it).
        """
        outcome = QUIET
        for metric, test, c in self.levels:
            value = get(metric)
            # NaN is "no value", not a number below everything (x != x: NaN test without a call)
            if value is None or value != value:  # noqa: PLR0124
                c.unavailable += 1
                if outcome == QUIET:
                    outcome = UNAVAILABLE
            elif test(value):
                outcome = HELD
        for c in self.crossings:
            value = get(c.metric)
            if value is None or value != value:  # noqa: PLR0124
                c.held = False
                c.unavailable += 1
                if outcome == QUIET:
                    outcome = UNAVAILABLE
                continue
            previous = c.previous
            if previous is None:
                c.held = False
            elif c.crossing > 0:
                c.held = previous <= c.threshold < value
            else:
                c.held = previous >= c.threshold > value
            if commit or previous is None:
                c.previous = value
            if c.held:
                outcome = HELD
        return outcome

    def held_reasons(self, get: Callable[[str], float | None]) -> list[str]:
        """The wake reasons of the conditions that held at the last ``check`` (same values)."""
        reasons = []
        for c in self.all:
            if c.test is not None:
                value = get(c.metric)
                held = value is not None and value == value and bool(c.test(value))  # noqa: PLR0124
            else:
                held = c.held
            if held:
                reasons.append(c.wake_reason)
        return reasons


__all__ = ["HELD", "QUIET", "UNAVAILABLE", "CompiledCondition", "CompiledConditions"]
