"""``--scheduler ADDRESS``: refused before the sweep submits anything unless a Dask scheduler
answers there: Dask's connect timeout (``distributed.comm.timeouts.connect``, 30 s) to connect,
as long again for its answer.

``distributed.Client`` cannot be trusted with the first contact: it waits for ever for the
handshake of a peer that accepts the connection and never answers as Dask does (an HTTP server),
and raises its own ``OSError`` or ``ValueError`` for a closed port or an address that is not one.
"""

from __future__ import annotations

import asyncio
import importlib
from typing import Any

from core.errors import RefuseToStartError


def check_scheduler(address: str) -> None:
    """Raise ``RefuseToStartError`` naming ``address`` unless a Dask scheduler answers there."""
    importlib.import_module("distributed")  # its defaults, the connect timeout among them
    dask = importlib.import_module("dask")
    timeout = dask.utils.parse_timedelta(
        dask.config.get("distributed.comm.timeouts.connect"), default="seconds"
    )
    where = f"--scheduler {address}"
    try:
        answer = asyncio.run(asyncio.wait_for(_identity(address), 2 * timeout))
    except TimeoutError:
        raise RefuseToStartError(
            f"{where}: no Dask scheduler answered in {2 * timeout:g} s"
        ) from None
    except Exception as exc:  # whatever stops a probe says the same: no scheduler there
        raise RefuseToStartError(f"{where}: no Dask scheduler there ({_said(exc)})") from None
    kind = answer.get("type") if isinstance(answer, dict) else None
    if kind != "Scheduler":
        raise RefuseToStartError(f"{where}: the peer there is not a Dask scheduler ({kind!r})")


async def _identity(address: str) -> Any:
    comm = await importlib.import_module("distributed.comm").connect(address)
    try:
        await comm.write({"op": "identity", "reply": True})
        return await comm.read()
    finally:
        comm.abort()


def _said(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__


__all__ = ["check_scheduler"]
