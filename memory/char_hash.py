"""Hashed character n-gram counts, equal to scikit-learn's
``HashingVectorizer(analyzer="char_wb", ngram_range=(3, 5), alternate_sign=False, norm=None,
lowercase=True)`` without importing scikit-learn and SciPy under it (about 140 MB of a daemon's
resident memory for one vectoriser).

The same three steps as scikit-learn 1.x: lower-case; split on whitespace (runs of whitespace
collapsed), pad each word with one space on either side and take its n-grams of each length (a word
shorter than n gives itself once); hash each n-gram's UTF-8 bytes with MurmurHash3 x86 32-bit
(seed 0, read as signed) to the column ``abs(h) % dim`` (``h = -2**31``: the column of
``2**31 % dim``) and count. ``tests/unit/test_memory_char_hash.py`` holds it to scikit-learn.
Hashes are pure Python, so each n-gram's column is remembered (texts share most of theirs).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

_MASK = 0xFFFFFFFF
_C1 = 0xCC9E2D51
_C2 = 0x1B873593
_WHITE_SPACES = re.compile(r"\s\s+")
_CACHE_LIMIT = 1 << 17  # n-grams whose column is remembered (about 15 MB at the limit)


def murmurhash3_32(data: bytes, seed: int = 0) -> int:
    """MurmurHash3 x86 32-bit of ``data``, as a signed 32-bit integer."""
    h1 = seed & _MASK
    n_blocks = len(data) // 4
    for block in range(n_blocks):
        k1 = int.from_bytes(data[4 * block : 4 * block + 4], "little")
        h1 ^= _mix_k1(k1)
        h1 = ((h1 << 13) | (h1 >> 19)) & _MASK
        h1 = (h1 * 5 + 0xE6546B64) & _MASK
    tail = data[4 * n_blocks :]
    k1 = 0
    if len(tail) >= 3:
        k1 ^= tail[2] << 16
    if len(tail) >= 2:
        k1 ^= tail[1] << 8
    if tail:
        k1 ^= tail[0]
        h1 ^= _mix_k1(k1)
    h1 ^= len(data)
    h1 ^= h1 >> 16
    h1 = (h1 * 0x85EBCA6B) & _MASK
    h1 ^= h1 >> 13
    h1 = (h1 * 0xC2B2AE35) & _MASK
    h1 ^= h1 >> 16
    return h1 - (1 << 32) if h1 & 0x80000000 else h1


def _mix_k1(k1: int) -> int:
    k1 = (k1 * _C1) & _MASK
    k1 = ((k1 << 15) | (k1 >> 17)) & _MASK
    return (k1 * _C2) & _MASK


def char_wb_ngrams(text: str, min_n: int = 3, max_n: int = 5) -> Iterator[str]:
    """scikit-learn's ``_char_wb_ngrams`` of the lower-cased ``text``."""
    for word in _WHITE_SPACES.sub(" ", text.lower()).split():
        padded = " " + word + " "
        length = len(padded)
        for n in range(min_n, max_n + 1):
            offset = 0
            yield padded[offset : offset + n]
            while offset + n < length:
                offset += 1
                yield padded[offset : offset + n]
            if offset == 0:  # a word shorter than n counts once
                break


class HashedCharNgrams:
    """Counts of hashed char_wb n-grams in ``dim`` columns, one row per text."""

    def __init__(self, dim: int, min_n: int = 3, max_n: int = 5) -> None:
        self.dim = dim
        self._range = (min_n, max_n)
        self._columns: dict[str, int] = {}

    def counts(self, texts: Sequence[str]) -> np.ndarray[Any, np.dtype[np.float64]]:
        rows = np.zeros((len(texts), self.dim), dtype=np.float64)
        for row, text in enumerate(texts):
            for ngram in char_wb_ngrams(text, *self._range):
                rows[row, self._column(ngram)] += 1.0
        return rows

    def _column(self, ngram: str) -> int:
        column = self._columns.get(ngram)
        if column is None:
            h = murmurhash3_32(ngram.encode("utf-8"))
            column = (
                (2147483647 - (self.dim - 1)) % self.dim if h == -(1 << 31) else abs(h) % self.dim
            )
            if len(self._columns) >= _CACHE_LIMIT:
                self._columns.clear()
            self._columns[ngram] = column
        return column


__all__ = ["HashedCharNgrams", "char_wb_ngrams", "murmurhash3_32"]
