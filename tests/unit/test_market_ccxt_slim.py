"""``market.ccxt_slim``: ccxt's async package with binanceusdm alone loaded (issue #18), checked
in fresh interpreters (pytest's process may have imported ccxt whole already)."""

from __future__ import annotations

import json
import subprocess
import sys

_SLIM = """
import json, sys
from market.ccxt_slim import async_ccxt, exchange_class
from market.ccxt_client import make_binanceusdm
exchange = make_binanceusdm("http://127.0.0.1:9")
package = async_ccxt()
from ccxt.async_support.binanceusdm import binanceusdm
from ccxt.async_support.binance import binance
from ccxt.base import errors
loaded_before = sorted(m for m in sys.modules if m.startswith("ccxt.async_support.") and m.count(".") == 2)
okx = package.okx
print(json.dumps({
    "same_class": type(exchange) is binanceusdm and exchange_class("binanceusdm") is binanceusdm,
    "attribute_is_class": package.binanceusdm is binanceusdm and package.binance is binance,
    "errors": package.BadSymbol is errors.BadSymbol and package.NetworkError is errors.NetworkError,
    "version": package.__version__,
    "loaded_before": loaded_before,
    "okx_lazy": isinstance(okx, type) and "ccxt.async_support.okx" in sys.modules,
    "kraken_loaded": "ccxt.async_support.kraken" in sys.modules,
    "in_list": "kraken" in package.exchanges,
    "url": exchange.urls["api"]["fapiPublic"],
}))
"""

_FULL_FIRST = """
import json
import ccxt.async_support
from market.ccxt_slim import exchange_class
print(json.dumps({"kraken": "kraken" in vars(ccxt.async_support),
                  "class": exchange_class("binanceusdm") is ccxt.async_support.binanceusdm}))
"""


def _run(script: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def test_binanceusdm_alone_is_ccxts_own_class() -> None:
    import ccxt

    found = _run(_SLIM)
    assert found["same_class"] is True
    assert found["attribute_is_class"] is True
    assert found["errors"] is True
    assert found["version"] == ccxt.__version__
    assert found["loaded_before"] == [
        "ccxt.async_support.base",
        "ccxt.async_support.binance",
        "ccxt.async_support.binanceusdm",
    ]
    assert found["okx_lazy"] is True  # any other exchange still loads when asked for
    assert found["kraken_loaded"] is False and found["in_list"] is True
    assert str(found["url"]).startswith("http://127.0.0.1:9")


def test_a_process_that_imported_ccxt_whole_keeps_it() -> None:
    assert _run(_FULL_FIRST) == {"kraken": True, "class": True}
