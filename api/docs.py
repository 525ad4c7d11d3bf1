"""The API's documentation pages behind the same read rule as the data (when reads need a
token, /docs, /redoc and /openapi.json need it too: they describe the data), with Swagger UI's
and ReDoc's assets served from this server (the fastapi-offline package ships them): no CDN at
run time."""

from __future__ import annotations

from pathlib import Path

import fastapi_offline
from fastapi import APIRouter, Depends, FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import JSONResponse
from fastapi.staticfiles import StaticFiles

from api.deps import require_read, require_read_page

ASSETS = Path(fastapi_offline.__file__).resolve().parent / "static"
ASSETS_URL = "/docs-assets"


def install(app: FastAPI) -> None:
    """/openapi.json, /docs and /redoc (FastAPI's own are switched off in create_app)."""
    app.mount(ASSETS_URL, StaticFiles(directory=ASSETS), name="docs-assets")
    router = APIRouter(include_in_schema=False)

    @router.get("/openapi.json", dependencies=[Depends(require_read)])
    def openapi(request: Request):
        return JSONResponse(request.app.openapi())

    @router.get("/docs", dependencies=[Depends(require_read_page)])
    def swagger(request: Request):
        root = request.scope.get("root_path", "").rstrip("/")
        return get_swagger_ui_html(
            openapi_url=f"{root}/openapi.json",
            title="mpcoa API",
            swagger_js_url=f"{root}{ASSETS_URL}/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS_URL}/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
        )

    @router.get("/redoc", dependencies=[Depends(require_read_page)])
    def redoc(request: Request):
        root = request.scope.get("root_path", "").rstrip("/")
        return get_redoc_html(
            openapi_url=f"{root}/openapi.json",
            title="mpcoa API",
            redoc_js_url=f"{root}{ASSETS_URL}/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS_URL}/favicon.png",
            with_google_fonts=False,
        )

    app.include_router(router)
