"""Client order ids derived from the decision that asked for the order.

The same (decision, ticker, action, seq) always maps to the same id, so executing a decision twice
(a retry, a restart that replays it) finds the order the first run placed instead of placing
another. Ids always match Binance's ``newClientOrderId`` rule, ``^[.A-Z:/a-z0-9_-]{1,36}$``,
whatever the decision id looks like: the decision id itself is hashed, never copied in.

Layout: ``vg<side>-<symbol>-<digest>``, e.g. ``vgb-BTCUSDT-8c1f0e6d2a9b47f3e210``: a readable
prefix (side ``b``/``s`` and up to 10 symbol characters) then 80 bits of BLAKE2b over every input,
so distinct inputs collide only with negligible probability (about 2**-40 after 2**20 orders).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Final

CLIENT_ORDER_ID_PATTERN: Final = re.compile(r"^[.A-Z:/a-z0-9_-]{1,36}$")

_DIGEST_BYTES: Final = 10  # 20 hex characters
_SYMBOL_CHARS: Final = 10
_SIDE_LETTER: Final = {"BUY": "b", "SELL": "s"}
#: changing how ids are derived must change this, so old and new ids never mean different orders
_DERIVATION: Final = "vigil-client-order-id-v1"


def client_order_id(decision_id: str, ticker: str, action: str, seq: int = 0) -> str:
    """The deterministic client order id for one order of one decision.

    ``action`` is ``BUY`` or ``SELL`` (any case, or ``agent.decision.Action``); ``seq`` tells apart
    several orders one decision places for the same ticker and side (0 for the first).
    """
    side = str(action).upper()
    if side not in _SIDE_LETTER:
        raise ValueError(f"action must be BUY or SELL, got {action!r}")
    if seq < 0:
        raise ValueError(f"seq must be >= 0, got {seq}")
    material = json.dumps([_DERIVATION, decision_id, ticker, side, seq], ensure_ascii=True)
    digest = hashlib.blake2b(material.encode("ascii"), digest_size=_DIGEST_BYTES).hexdigest()
    return f"vg{_SIDE_LETTER[side]}-{_symbol_part(ticker)}-{digest}"


def is_valid_client_order_id(value: str) -> bool:
    return CLIENT_ORDER_ID_PATTERN.fullmatch(value) is not None


def _symbol_part(ticker: str) -> str:
    """``BTC/USDT`` -> ``BTCUSDT``: only for reading; the digest is what makes the id unique."""
    kept = "".join(c for c in ticker.upper() if c.isascii() and c.isalnum())
    return kept[:_SYMBOL_CHARS] or "X"
