"""``/docs``: Swagger UI served by the API itself, offline (FastAPI's default loads it from a CDN).

The files come from the ``swagger-ui-bundle-v2`` package (Swagger UI 5, Apache-2.0, its licence in
the package's metadata), mounted under ``/docs/static``. ReDoc (``/redoc``) is turned off: it
would load from a CDN too, and Swagger UI reads the same ``/openapi.json``. The docs hold no data,
so they need no token; "Authorize" takes it for the tried requests.
"""

# no `from __future__ import annotations`: FastAPI reads the routes' annotations
from pathlib import Path
from typing import Final

import swagger_ui_bundle
from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

DOCS_URL: Final = "/docs"
DOCS_STATIC: Final = "/docs/static"
SWAGGER_DIR: Final = Path(str(swagger_ui_bundle.swagger_ui_path))


def add_docs(app: FastAPI) -> None:
    """Serve Swagger UI at ``/docs`` from local files (create the app with ``docs_url=None``)."""
    openapi_url = app.openapi_url or "/openapi.json"

    @app.get(DOCS_URL, include_in_schema=False)
    async def docs() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} API",
            swagger_js_url=f"{DOCS_STATIC}/swagger-ui-bundle.js",
            swagger_css_url=f"{DOCS_STATIC}/swagger-ui.css",
            swagger_favicon_url=f"{DOCS_STATIC}/favicon-32x32.png",
            swagger_ui_parameters={"persistAuthorization": False, "tryItOutEnabled": False},
        )

    app.mount(DOCS_STATIC, StaticFiles(directory=SWAGGER_DIR), name="docs_static")


__all__ = ["DOCS_STATIC", "DOCS_URL", "add_docs"]
