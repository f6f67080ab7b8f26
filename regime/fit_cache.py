"""Fitted regime models on disk, so a second replay of the same span does no fitting.

A fit is a pure function of the candles it is given and the HMM settings (seed included); the
instant it is made only labels the result (``regime.hmm_fit.stamp``). So an entry is keyed by a
SHA-256 of exactly those two (the frame's open times and OHLCV bytes, the ``CryptoHmmConfig``
JSON) plus ``FORMAT`` and the hmmlearn / scikit-learn / numpy versions (a new library may fit
differently), holds the fit as made without a stamp, and the caller stamps what it loads. A hit
restores the same report and model the fit would have produced, so journals stay byte-identical,
and a daemon restarted within the same 4h candle (or a second daemon on the same span) fits
nothing at warm-up.

Entries are pickles written to a temporary name and renamed (sweep workers share one folder); an
unreadable entry is a miss and is fitted again. The folder is the user's own cache: entries are
read only from there.
"""

from __future__ import annotations

import hashlib
import logging
import pickle
from importlib import metadata
from pathlib import Path
from typing import Any, Final

import numpy as np
import pandas as pd

from core.regular_file import open_regular_file
from state.atomic import atomic_write_bytes

log = logging.getLogger(__name__)

#: 2: the fitted model is ``regime.hmm_types.FittedHmm`` (it moved from crypto_hmm); 3: it holds
#: the HMM's parameters as arrays (``regime.hmm_predict.HmmParams``), not a GaussianHMM; 4: keyed
#: without the fit's instant, the entry unstamped (stamped by whoever loads it)
FORMAT: Final = "vigil-regime-fit-4"
_LIBRARIES: Final = ("hmmlearn", "scikit-learn", "numpy")


class FitCache:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.hits = 0
        self.misses = 0
        self._versions = ",".join(_version(name) for name in _LIBRARIES)

    def key(self, frame: pd.DataFrame, config_json: str) -> str:
        digest = hashlib.sha256()
        for part in (FORMAT, self._versions, config_json):
            digest.update(part.encode())
            digest.update(b"\0")
        digest.update(candle_bytes(frame))
        return digest.hexdigest()

    def load(self, key: str) -> Any | None:
        path = self._path(key)
        try:
            with open_regular_file(path) as handle:  # a FIFO there held the fit for a writer
                value = pickle.load(handle)
        except FileNotFoundError:
            self.misses += 1
            return None
        except Exception as exc:  # a torn or foreign file: fit again
            log.warning("regime fit cache: %s unreadable (%s); fitting again", path, exc)
            self.misses += 1
            return None
        self.hits += 1
        return value

    def contains(self, key: str) -> bool:
        """An entry is stored under ``key`` (it may still prove unreadable when loaded)."""
        return self._path(key).is_file()

    def store(self, key: str, value: Any) -> None:
        path = self._path(key)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            # a fresh temporary name (O_EXCL): the fixed <entry>.<pid>.tmp, a symlink planted
            # there was written through, and a FIFO held the replay; a cache needs no fsync
            data = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            atomic_write_bytes(path, data, durable=False)
        except OSError as exc:  # a cache that cannot be written only costs time
            log.warning("regime fit cache: cannot write %s (%s)", path, exc)

    def _path(self, key: str) -> Path:
        return self.folder / key[:2] / f"{key}.pickle"


_CANDLE_COLUMNS: Final = ["open", "high", "low", "close", "volume"]


def candle_bytes(frame: pd.DataFrame) -> bytes:
    """The frame's open times and OHLCV values (rows of open, high, low, close, volume) as bytes.
    A frame of exactly those columns in that order (a history's) is read whole: selecting them
    first copies the frame for the same bytes."""
    times = np.ascontiguousarray(frame.index.to_numpy(dtype=np.int64)).tobytes()
    whole = list(frame.columns) == _CANDLE_COLUMNS
    ohlcv = frame if whole else frame[_CANDLE_COLUMNS]
    return times + np.ascontiguousarray(ohlcv.to_numpy(dtype=np.float64)).tobytes()


def _version(name: str) -> str:
    try:
        return f"{name}={metadata.version(name)}"
    except metadata.PackageNotFoundError:
        return f"{name}=?"


__all__ = ["FORMAT", "FitCache", "candle_bytes"]
