"""Any JSON an embeddings server may answer is either the texts' vectors (finite, float32-sized,
one per text) or a ValueError the adapter turns into StoreUnavailableError: never a KeyError,
TypeError or AttributeError past the callers, never a NaN taken as a vector."""

from __future__ import annotations

import math

from hypothesis import given, settings
from hypothesis import strategies as st
from property_budget import examples

from memory.embeddings import _vectors

_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=5))
_JSON = st.recursive(
    _SCALARS,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(st.sampled_from(["data", "index", "embedding", "x"]), inner, max_size=3)
    ),
    max_leaves=20,
)
_ITEM = st.fixed_dictionaries(
    {"embedding": st.lists(st.one_of(st.floats(), st.integers(), _SCALARS), max_size=4)},
    optional={"index": st.one_of(st.integers(-2, 3), _SCALARS)},
)
_ANSWERS = _JSON | st.builds(lambda items: {"data": items}, st.lists(_ITEM | _JSON, max_size=3))


@settings(max_examples=examples(300), deadline=None)
@given(body=_ANSWERS, count=st.integers(1, 3))
def test_an_answer_is_vectors_or_a_value_error(body: object, count: int) -> None:
    try:
        vectors = _vectors(body, count)
    except ValueError:
        return
    assert len(vectors) == count
    for vector in vectors:
        assert vector and all(type(v) is float and math.isfinite(v) for v in vector)
        assert all(abs(v) <= 3.4028234663852886e38 for v in vector)
