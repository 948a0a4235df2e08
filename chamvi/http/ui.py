"""``/ui``: the approvals page and its chat view, plain HTML, CSS and JavaScript in the package (no build).

The page itself is public, like the OpenAPI document: it holds no data. Everything it shows it reads
from the API with the token a person types into it, which it keeps in the tab's session storage.
Its files are fixed, read once, and served with a content security policy that lets the page load
nothing and talk to nothing but this server, and run no inline script.
"""

from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from starlette.responses import RedirectResponse, Response

UI_PATH = "/ui"
_FILES = {
    "": ("index.html", "text/html"),
    "app.js": ("app.js", "text/javascript"),
    "chat.js": ("chat.js", "text/javascript"),
    "app.css": ("app.css", "text/css"),
}
_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; img-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # a new version of chamvi serves new files under the same names
    "Cache-Control": "no-cache",
}


def ui_router(base_path: str = "") -> APIRouter:
    """The approvals page's routes: ``<base_path>/ui`` redirects to ``<base_path>/ui/``, which serves it.

    Args:
        base_path: the API's prefix; the page finds the API's routes below it from its own address.
    """
    router = APIRouter(include_in_schema=False)
    folder = files("chamvi.http") / "ui"
    contents = {name: (folder.joinpath(file).read_bytes(), kind) for name, (file, kind) in _FILES.items()}
    page = f"{base_path}{UI_PATH}/"

    @router.get(f"{base_path}{UI_PATH}")
    async def ui_redirect() -> RedirectResponse:
        # the page's files are relative to the folder it is served from
        return RedirectResponse(page, status_code=308)

    def serve(name: str) -> None:
        body, kind = contents[name]

        async def ui_file() -> Response:
            return Response(body, media_type=kind, headers=_HEADERS)

        router.add_api_route(page + name, ui_file, methods=["GET"], name=f"ui:{name or 'index'}")

    for name in contents:
        serve(name)
    return router
