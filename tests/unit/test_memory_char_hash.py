"""``memory.char_hash`` counts what scikit-learn's HashingVectorizer counts, without importing it
(the local embedder's resident memory, issue #18)."""

from __future__ import annotations

import random
import string
from typing import Any

import numpy as np
import pytest
from scipy.sparse import csr_matrix
from sklearn.feature_extraction.text import HashingVectorizer
from sklearn.utils import murmurhash3_32 as sklearn_murmurhash3_32

from memory.char_hash import HashedCharNgrams, murmurhash3_32
from memory.embeddings import LOCAL_DIM, HashedNgramEmbedder

ALPHABET = string.ascii_letters + string.digits + " \t\n.,;:%/-+()éüßΔЖ中€🙂"


def _texts(seed: int, count: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(ALPHABET) for _ in range(rnd.randint(0, 240))) for _ in range(count)]


def _sklearn(dim: int) -> HashingVectorizer:
    return HashingVectorizer(
        analyzer="char_wb",
        ngram_range=(3, 5),
        n_features=dim,
        alternate_sign=False,
        norm=None,
        lowercase=True,
    )


def test_murmurhash3_is_sklearns_for_every_tail_length() -> None:
    rnd = random.Random(7)
    for length in range(0, 24):
        for _ in range(200):
            data = bytes(rnd.randrange(256) for _ in range(length))
            assert murmurhash3_32(data) == sklearn_murmurhash3_32(data, seed=0), data


def _equal_to_sparse(dense: np.ndarray[Any, np.dtype[np.float64]], sparse: csr_matrix) -> bool:
    """``dense == sparse.toarray()`` without dense copies: at 2**20 columns each is 1.3 GB, and
    making them (toarray, astype) and comparing took 6.5 of the test's ~14 CPU-seconds. Equal where
    ``sparse`` holds a value, and as many non-zero values: none anywhere else."""
    sparse = sparse.copy()
    sparse.sum_duplicates()
    sparse.eliminate_zeros()
    held = sparse.tocoo()
    return (
        dense.shape == sparse.shape
        and np.count_nonzero(dense) == held.nnz
        and np.array_equal(dense[held.row, held.col], held.data)
    )


@pytest.mark.parametrize("dim", [LOCAL_DIM, 7, 1 << 20])
def test_counts_equal_hashing_vectorizers(dim: int) -> None:
    texts = [
        *_texts(dim, 150),
        "BTC/USDT long closed at +2.3% after RSI 71;  stop loss hit.\n\nMomentum faded",
        "",
        "a",
        "ab  c",
        "   leading and trailing   ",
    ]
    assert _equal_to_sparse(HashedCharNgrams(dim).counts(texts), _sklearn(dim).transform(texts))


def test_the_embedding_is_the_one_the_vectoriser_gave() -> None:
    texts = [*_texts(3, 40), "Rolled up 4 trades of ETH/USDT in high_volatility: 3 losses"]
    counts = _sklearn(LOCAL_DIM).transform(texts).toarray().astype(np.float64)
    weighted = np.log1p(counts)
    norms = np.linalg.norm(weighted, axis=1, keepdims=True)
    unit = weighted / np.where(norms > 0, norms, 1.0)
    expected = [tuple(float(round(v, 6)) for v in row) for row in unit]
    assert HashedNgramEmbedder().embed_now(texts) == expected
