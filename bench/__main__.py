"""``python -m bench [name ...] [--option ...]``: run every ``bench/bench_*.py`` (or the named ones)
in turn. Options after the names go to the one named bench's ``main(argv)`` (e.g.
``python -m bench replay --full``)."""

from __future__ import annotations

import importlib
import pkgutil
import sys
import time

import bench


def main(argv: list[str]) -> int:
    names = sorted(
        info.name for info in pkgutil.iter_modules(bench.__path__) if info.name.startswith("bench_")
    )
    split = next((i for i, arg in enumerate(argv) if arg.startswith("-")), len(argv))
    asked, options = argv[:split], argv[split:]
    wanted = [n if n.startswith("bench_") else f"bench_{n}" for n in asked] or names
    unknown = sorted(set(wanted) - set(names))
    if unknown:
        print(f"unknown benchmark(s): {unknown}; available: {names}", file=sys.stderr)
        return 2
    if options and len(asked) != 1:
        print(f"options {options} need exactly one named benchmark", file=sys.stderr)
        return 2
    for name in wanted:
        print(f"\n=== {name} ===", flush=True)
        started = time.perf_counter()
        module = importlib.import_module(f"bench.{name}")
        if options:
            module.main(options)
        else:
            module.main()
        print(f"({name} took {time.perf_counter() - started:.1f} s)", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
