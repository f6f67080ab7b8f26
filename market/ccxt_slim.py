"""ccxt's async package with only the exchanges a daemon uses loaded.

``import ccxt.async_support`` runs two package ``__init__`` files that import every exchange ccxt
has, sync and async (about 200 modules, some 65 MB of a daemon's resident memory), while vigil uses
one: ``binanceusdm`` (and ``binance`` under it). ``async_ccxt`` runs those two ``__init__`` files
from ccxt's own source without their ``from ccxt[.async_support].X import X`` lines, so the
packages keep everything else (version, errors, ``Exchange``, precision helpers, the ``exchanges``
list); an exchange loads when it is first asked for (``exchange_class``, or the attribute through
the package's ``__getattr__``). The classes are ccxt's own: requests, parsing and errors are
unchanged.

Only a process that has not imported ccxt yet gets the slim packages; otherwise, or if ccxt's
``__init__`` no longer runs without those lines, ccxt is imported as usual.
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
import sys
from collections.abc import Callable
from types import ModuleType
from typing import Any

log = logging.getLogger(__name__)

_PACKAGES = ("ccxt", "ccxt.async_support")
# ``from ccxt.okx import okx`` / ``from ccxt.async_support.okx import okx``: one exchange
_EXCHANGE_IMPORT = re.compile(r"^from ccxt(?:\.async_support)?\.(\w+) import (\w+)\s*(#.*)?$")


def async_ccxt() -> ModuleType:
    """``ccxt.async_support``, slim when this process has not imported ccxt before."""
    if "ccxt" not in sys.modules:
        try:
            for name in _PACKAGES:
                _install_slim(name)
        except Exception as exc:  # a ccxt release whose __init__ needs its exchange lines
            log.warning("ccxt: the slim import failed (%r); importing every exchange", exc)
            for name in _PACKAGES:
                sys.modules.pop(name, None)
    return importlib.import_module("ccxt.async_support")


def exchange_class(name: str) -> Any:
    """ccxt's async exchange class ``name`` (e.g. ``binanceusdm``), loading its module if needed."""
    package = async_ccxt()
    exchange: Any = getattr(package, name)
    return exchange


def _install_slim(name: str) -> None:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None or spec.loader is None:
        raise ImportError(f"{name} is not installed")
    with open(spec.origin, encoding="utf-8") as handle:
        source = handle.read().splitlines()
    kept = [line for line in source if not _imports_one_exchange(line)]
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)
    try:
        exec(compile("\n".join(kept), spec.origin, "exec"), module.__dict__)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    module.__dict__["__getattr__"] = _lazy_exchanges(module)


def _imports_one_exchange(line: str) -> bool:
    match = _EXCHANGE_IMPORT.match(line)
    return match is not None and match.group(1) == match.group(2)


def _lazy_exchanges(package: ModuleType) -> Callable[[str], Any]:
    exchanges = frozenset(package.__dict__.get("exchanges", ()))

    def __getattr__(attribute: str) -> Any:
        if attribute not in exchanges:
            raise AttributeError(f"module {package.__name__!r} has no attribute {attribute!r}")
        module = importlib.import_module(f"{package.__name__}.{attribute}")
        _bind_loaded_exchanges(package, exchanges)
        return getattr(module, attribute)

    return __getattr__


def _bind_loaded_exchanges(package: ModuleType, exchanges: frozenset[str]) -> None:
    """As the full ``__init__`` does: ``package.X`` is the class X, not its module (importing a
    submodule binds the module; ``binanceusdm`` loads ``binance`` too)."""
    for name in exchanges:
        module = sys.modules.get(f"{package.__name__}.{name}")
        if module is not None and isinstance(package.__dict__.get(name), ModuleType):
            setattr(package, name, getattr(module, name))


__all__ = ["async_ccxt", "exchange_class"]
