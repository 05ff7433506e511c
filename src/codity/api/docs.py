"""Swagger UI at /api/v1/docs with its JavaScript and CSS served by this process.

FastAPI's default page loads Swagger UI from a CDN, which offline machines and strict CSPs
cannot reach; the `fastapi-offline` wheel ships the same assets (Swagger UI 5, which renders
OpenAPI 3.1), and we serve them from /api/v1/docs/static under a CSP of 'self'.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from starlette.staticfiles import StaticFiles

ASSETS_DIR = Path(str(files("fastapi_offline") / "static"))


def mount_docs(app: FastAPI, docs_url: str) -> None:
    static_url = f"{docs_url}/static"
    app.mount(static_url, StaticFiles(directory=ASSETS_DIR), name="swagger-static")
    openapi_url = app.openapi_url or "/openapi.json"

    async def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=openapi_url,
            title=f"{app.title} - docs",
            swagger_js_url=f"{static_url}/swagger-ui-bundle.js",
            swagger_css_url=f"{static_url}/swagger-ui.css",
            swagger_favicon_url=f"{static_url}/favicon.png",
        )

    app.add_api_route(docs_url, swagger_ui, methods=["GET"], include_in_schema=False)
