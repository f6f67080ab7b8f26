"""The ``Allow`` header of a 405: every method the request's path serves.

Starlette answers a method a path does not serve from the first route whose path matched, with
that route's methods only: ``/api/runs`` has a ``POST`` route (submit) and then a ``GET`` one (the
listing), so ``OPTIONS /api/runs`` said ``Allow: POST``, though ``GET`` is served too (RFC 9110:
``Allow`` lists the methods the target resource supports). Found by schemathesis.
"""

from __future__ import annotations

from collections.abc import Iterable

from starlette.routing import BaseRoute, Match, Route
from starlette.types import Scope


def allowed_methods(routes: Iterable[BaseRoute], scope: Scope) -> str | None:
    """The methods of every route whose path matches ``scope``'s, sorted and comma-separated;
    None when no plain route matches (a mount's own 405, static files', keeps its header)."""
    methods: set[str] = set()
    for route in routes:
        if isinstance(route, Route) and route.methods:
            match, _ = route.matches(scope)
            if match is not Match.NONE:
                methods |= route.methods
    return ", ".join(sorted(methods)) if methods else None


__all__ = ["allowed_methods"]
