"""The API on loopback against hostile input and broken state-dir files: every answer is JSON a
strict parser reads (no NaN or Infinity literal), and a file it cannot read or trust is a clear
answer naming it (409, or the figure null with its reason), never a 500."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fakes.api_support import serve_api, write_state_dir


@pytest.fixture
def state_dir(tmp_path: Path) -> Path:
    write_state_dir(tmp_path / "state")
    return tmp_path / "state"


def strict_json(text: str) -> object:
    """``json.loads`` refusing NaN, Infinity and -Infinity, as JSON.parse and most clients do."""

    def refuse(literal: str) -> object:
        raise ValueError(f"{literal} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.mark.parametrize("literal", ["NaN", "Infinity", "-Infinity", "1e400"])
async def test_a_422_quoting_a_non_finite_number_is_strict_json(
    state_dir: Path, literal: str
) -> None:
    """FastAPI's validation errors echo the input, and Python's json wrote a NaN it read back
    as the literal NaN: a body no JSON parser but Python's reads."""
    routes = (("PUT", "/api/memory/notes", "notes"), ("POST", "/api/trading/halt", "reason"))
    async with serve_api(state_dir) as api:
        for method, route, name in routes:
            body = f'{{"{name}": {literal}}}'.encode()
            headers = {**api.auth, "content-type": "application/json"}
            async with api.session.request(
                method, api.url + route, data=body, headers=headers
            ) as r:
                assert r.status == 422, route
                (issue,) = strict_json(await r.text())["detail"]  # type: ignore[index]
            assert issue["loc"] == ["body", name]
            assert issue["input"] in {"NaN", "Infinity", "-Infinity"}
