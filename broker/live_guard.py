"""Which Binance the ccxt broker may trade on, and its API keys: live money is opt-in twice.

Modes:

- ``testnet``: Binance USDⓈ-M demo trading, ``https://demo-fapi.binance.com`` (ccxt
  ``enable_demo_trading(True)``; keys from https://demo.binance.com/en/my/settings/api-management).
  The older futures testnet, ``https://testnet.binancefuture.com`` (ccxt ``set_sandbox_mode(True)``),
  serves the same API; ccxt refuses to combine the two.
- ``live``: ``https://fapi.binance.com``, real money. Only when BOTH the ``--live`` flag is given AND
  the environment says ``VIGIL_LIVE_CONFIRM=yes``; the flag alone refuses to start, so a typo in a
  command line or a leftover variable can never switch to real money on its own.

Keys come from the environment (``BINANCE_API_KEY`` / ``BINANCE_API_SECRET``) or from files named
by ``BINANCE_API_KEY_FILE`` / ``BINANCE_API_SECRET_FILE`` (Docker secrets). They are held as
``SecretStr``, so they never appear in a repr, a log line or a snapshot.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, Literal

from pydantic import BaseModel, ConfigDict, SecretStr

from core.errors import RefuseToStartError
from core.regular_file import read_regular_text

Mode = Literal["testnet", "live"]

LIVE_CONFIRM_VAR: Final = "VIGIL_LIVE_CONFIRM"
LIVE_CONFIRM_VALUE: Final = "yes"
API_KEY_VAR: Final = "BINANCE_API_KEY"
API_SECRET_VAR: Final = "BINANCE_API_SECRET"
TESTNET_URL: Final = "https://demo-fapi.binance.com"
LEGACY_TESTNET_URL: Final = "https://testnet.binancefuture.com"
LIVE_URL: Final = "https://fapi.binance.com"
#: a key or secret is under a hundred characters; a file holding more is not one
KEY_FILE_MAX_BYTES: Final = 64 * 1024


class ApiKeys(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    api_key: SecretStr
    api_secret: SecretStr


def check_live(live_flag: bool, env: Mapping[str, str]) -> Mode:
    """``live`` only with the flag AND ``VIGIL_LIVE_CONFIRM=yes``; the flag alone refuses to start."""
    confirmed = env.get(LIVE_CONFIRM_VAR, "").strip() == LIVE_CONFIRM_VALUE
    if not live_flag:
        return "testnet"
    if not confirmed:
        raise RefuseToStartError(
            f"--live trades real money on {LIVE_URL}; it also needs the environment setting "
            f"{LIVE_CONFIRM_VAR}={LIVE_CONFIRM_VALUE} (got "
            f"{env.get(LIVE_CONFIRM_VAR, '<unset>')!r}). Refusing to start."
        )
    return "live"


def load_api_keys(env: Mapping[str, str]) -> ApiKeys:
    """The key pair from the environment or secret files; refuses to start when either is missing."""
    return ApiKeys(
        api_key=SecretStr(_read(env, API_KEY_VAR)),
        api_secret=SecretStr(_read(env, API_SECRET_VAR)),
    )


def _read(env: Mapping[str, str], name: str) -> str:
    value = env.get(name, "").strip()
    file_name = env.get(f"{name}_FILE", "").strip()
    if value and file_name:
        raise RefuseToStartError(f"both {name} and {name}_FILE are set: keep one")
    if file_name:
        try:  # a small regular file only: a FIFO there held the start, a huge one was read whole
            text = read_regular_text(file_name, encoding="utf-8-sig", max_bytes=KEY_FILE_MAX_BYTES)
        except (OSError, UnicodeDecodeError) as exc:
            raise RefuseToStartError(f"{name}_FILE={file_name!r} cannot be read: {exc}") from None
        value = text.strip()
    if not value:
        raise RefuseToStartError(f"the ccxt broker needs {name} (or {name}_FILE) to be set")
    return value


__all__ = ["ApiKeys", "Mode", "check_live", "load_api_keys"]
