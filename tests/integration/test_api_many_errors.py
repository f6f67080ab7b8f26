"""A body within the 1 MiB ceiling can hold 80,000 keys the route does not take: the 422 listed
each of them (8.7 MB answered for 1 MiB asked) and encoding the list held the event loop for
seconds, the daemon's when the API process forwards the edit. A 422 lists the first 50 errors
and says how many more there were."""

from __future__ import annotations

import json
from pathlib import Path

from fakes.api_support import serve_api, write_state_dir

from api.app import ISSUES_LISTED
from api.bodylimit import MAX_BODY_BYTES


async def test_a_body_of_many_unknown_keys_gets_a_short_422(tmp_path: Path) -> None:
    state_dir = tmp_path / "state"
    write_state_dir(state_dir)
    keys = 60_000
    body = json.dumps({f"k{n}": 1 for n in range(keys)}).encode()
    assert len(body) < MAX_BODY_BYTES
    headers = {"Content-Type": "application/json"}
    async with (
        serve_api(state_dir) as api,
        api.session.put(
            api.url + "/api/memory/notes", data=body, headers={**api.auth, **headers}
        ) as r,
    ):
        code, answer = r.status, await r.read()
    detail = json.loads(answer)["detail"]
    assert code == 422
    assert len(answer) < 64 * 1024, len(answer)
    assert [d["loc"] for d in detail[:2]] == [["body", "k0"], ["body", "k1"]]
    assert len(detail) == ISSUES_LISTED + 1
    assert detail[-1] == {
        "loc": ["body"],
        "msg": f"and {keys - ISSUES_LISTED:,} more",
        "type": "more_not_listed",
    }
