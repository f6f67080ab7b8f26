"""Hostile model answers (>= 1,000) through the real anthropic SDK, the Claude decider, the
decision routine with its risk caps, the state store and the journal.

Prints per category how many answers there were, how many Claude decided (the rest: the
fallback), the orders that came out, and every broken invariant (a cap breached, an exception
out of the routine, a decision not journaled, a secret in the stored memory). Exit 1 on any.

Run: ``python -m bench fuzz_answers [--count N] [--seed S]`` (default 1,100, seed 7).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import tempfile
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench fuzz_answers")
    parser.add_argument("--count", type=int, default=1_100)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args(argv or [])
    # the corpus and the fake Messages API are test fakes: the bench runs them as the tests do
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from fakes.hostile_answers import hostile_corpus, run_corpus

    logging.disable(logging.CRITICAL)  # thousands of expected warnings; the report says it all
    corpus = hostile_corpus(args.count, args.seed)
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as workdir:
        report = asyncio.run(run_corpus(corpus, Path(workdir)))
    took = time.perf_counter() - started
    print(
        f"{report.answers} hostile answers in {took:.1f} s ({took / max(1, report.answers) * 1e3:.1f} ms each)"
    )
    print(
        f"journaled {report.journaled}; decided by claude {report.by_claude}, by the fallback {report.by_fallback}"
    )
    print(f"orders that passed the caps: {report.intents}")
    for name, count in sorted(report.per_category.items()):
        print(f"  {name:<16} {count}")
    print(f"violations: {len(report.violations)}")
    for line in report.violations[:50]:
        print(f"  {line}")
    if report.violations:
        raise SystemExit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
