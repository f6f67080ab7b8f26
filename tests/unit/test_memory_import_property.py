"""Any line ``vigil memory import`` is given is imported or refused naming the line (exit 2); what
it imported every memory command then reads without a traceback, and prints JSON (no NaN or
Infinity): the import is how another program's or a person's file reaches the store."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from property_budget import examples

from contract.memory_contract import make_insight, make_trade
from memory.embeddings import HashedNgramEmbedder
from runner.cli import main

_TRADE = {"type": "trade", **json.loads(make_trade(0).model_dump_json())}
(_EMBEDDING,) = HashedNgramEmbedder().embed_now(["SOL: stops under the 4h low saved the long"])
_INSIGHT = {
    "type": "insight",
    **json.loads(
        make_insight("SOL: stops under the 4h low saved the long")
        .model_copy(update={"embedding": _EMBEDDING})
        .model_dump_json()
    ),
}
#: the fields a reader takes as numbers, times or vectors
_FIELDS = [
    "created_ms",
    "ttl_days",
    "salience",
    "embedding",
    "situation_vector",
    "pnl_pct",
    "holding_secs",
    "entry_ms",
    "exit_ms",
    "entry_price",
]
_NUMBERS = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.sampled_from([10**16, 4_102_444_800_000, -1, 0, -(10**15)]),
    st.floats(allow_nan=False, allow_infinity=False),
    st.sampled_from([1e39, -1e39, 1e308, -1e308, 0.0, -5.0]),
)
_VALUES = st.one_of(_NUMBERS, st.lists(_NUMBERS, max_size=14), st.none(), st.text(max_size=5))


def _code(args: list[str]) -> int:
    try:
        return main(args)
    except SystemExit as exc:
        return int(exc.code or 0)


@settings(
    max_examples=examples(100),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(
    base=st.sampled_from([_TRADE, _INSIGHT]),
    changes=st.dictionaries(st.sampled_from(_FIELDS), _VALUES, min_size=1, max_size=2),
)
def test_an_import_is_taken_or_refused_and_read_back(
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
    base: dict[str, Any],
    changes: dict[str, Any],
) -> None:
    folder = tmp_path_factory.mktemp("import")
    path = folder / "in.jsonl"
    path.write_text(json.dumps({**base, **changes}) + "\n")
    state = ["--state-dir", str(folder / "state")]
    code = _code([*state, "memory", "import", str(path)])
    assert code in (0, 2)
    capsys.readouterr()
    for command in (["list", "--all"], ["search", "SOL stops"], ["stats"], ["export"]):
        assert _code([*state, "memory", *command]) == 0
    out = capsys.readouterr().out
    assert "NaN" not in out and "Infinity" not in out and "nan" not in out.split()
