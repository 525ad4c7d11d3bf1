"""Logging in to the dashboard (and the API docs) with an API token: GET shows the form, POST
checks the token and opens a session (api.session), POST /dashboard/logout ends it.
Both POSTs refuse another site's Origin (login CSRF)."""

from __future__ import annotations

from urllib.parse import parse_qs

from fastapi import APIRouter, HTTPException, Request, status
from fastapi.responses import HTMLResponse, RedirectResponse

from api import session as browser_session
from api.deps import SessionDep, check_token
from api.security import bearer_credentials

from .routes import render

router = APIRouter(include_in_schema=False)
MAX_FORM_BYTES = 4096


def _login_page(request: Request, message: str = "", status_code: int = 200, **context):
    next_url = browser_session.safe_next(context.pop("next_url", None), _dash(request) + "/")
    return render(request, "login.html", status=status_code, title="Log in", message=message,
                  next_url=next_url, **context)


def _dash(request: Request) -> str:
    return request.scope.get("root_path", "").rstrip("/") + "/dashboard"


@router.get("/dashboard/login", response_class=HTMLResponse)
def login_form(request: Request, session: SessionDep):
    row = browser_session.session_token(request, session)
    return _login_page(request, next_url=request.query_params.get("next"),
                       logged_in_as=row.name if row else None)


@router.post("/dashboard/login", response_class=HTMLResponse)
async def login(request: Request, session: SessionDep):
    if not browser_session.same_origin(request):
        return _login_page(request, "This form must be sent from this server's own page.", 403,
                           logged_in_as=None)
    form = parse_qs((await request.body())[:MAX_FORM_BYTES].decode("utf-8", "replace"))
    token = (form.get("token") or [""])[0].strip()
    next_url = (form.get("next") or [None])[0]
    try:
        row = check_token(session, bearer_credentials(token), scope="read")
    except HTTPException:
        return _login_page(request, "That token is not valid (unknown, revoked or expired).", 401,
                           next_url=next_url, logged_in_as=None)
    response = RedirectResponse(
        browser_session.safe_next(next_url, _dash(request) + "/"),
        status_code=status.HTTP_303_SEE_OTHER,
    )
    browser_session.set_cookie(request, response, session, row)
    session.commit()
    return response


@router.post("/dashboard/logout")
def logout(request: Request, session: SessionDep):
    if not browser_session.same_origin(request):
        return HTMLResponse("forbidden", status_code=403)
    browser_session.end_session(request, session)  # every copy of the cookie stops working
    session.commit()
    response = RedirectResponse(_dash(request) + "/login", status_code=status.HTTP_303_SEE_OTHER)
    browser_session.clear_cookie(request, response)
    return response
