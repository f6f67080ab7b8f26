"""``/docs`` is Swagger UI from the API's own files: every asset the page references is local and
served, nothing comes from another origin (a daemon's API is often on a machine without internet),
and ReDoc, which would need a CDN, is off."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urljoin, urlparse

from fakes.api_support import serve_api, write_state_dir

# src= / href= attributes and url: '...' in the page's inline set-up script
REFERENCE = re.compile(r"""(?:src|href)\s*=\s*["']([^"']+)["']|url:\s*["']([^"']+)["']""")


async def test_docs_reference_only_local_assets_and_each_is_served(tmp_path: Path) -> None:
    write_state_dir(tmp_path / "state")
    async with serve_api(tmp_path / "state") as api:
        async with api.session.get(api.url + "/docs") as r:
            assert r.status == 200
            page = await r.text()
        references = [a or b for a, b in REFERENCE.findall(page)]
        # checked before fetching anything: a CDN reference must fail here, not reach out
        assert all(not urlparse(ref).netloc and not urlparse(ref).scheme for ref in references)
        fetched: dict[str, tuple[int, str, int]] = {}
        for ref in references:
            async with api.session.get(urljoin(api.url + "/docs", ref)) as r:
                fetched[ref] = (r.status, r.content_type, len(await r.read()))
        async with api.session.get(api.url + "/redoc") as r:
            redoc = r.status
    assert "SwaggerUIBundle" in page
    assert "http://" not in page and "https://" not in page and "//cdn" not in page
    assert set(references) == {
        "/docs/static/swagger-ui.css",
        "/docs/static/favicon-32x32.png",
        "/docs/static/swagger-ui-bundle.js",
        "/openapi.json",
    }
    for ref, (status, _type, size) in fetched.items():
        assert status == 200 and size > 0, ref
    assert fetched["/docs/static/swagger-ui-bundle.js"][1] in (
        "text/javascript",
        "application/javascript",
    )
    assert fetched["/openapi.json"][1] == "application/json"
    assert redoc == 404
