"""The dashboard: server-rendered pages under /dashboard/.

Pages read the database through `api.dashboard.queries` (the service layer and the models); they
never write. Templates are Jinja2 with autoescape on; charts are drawn in the browser by the
vendored Chart.js (static/vendor/chart.umd.js) from JSON embedded in the page, so a page needs no
network beyond this server. Bad ids and unknown pages get an HTML 404, bad query values an HTML 400.
"""

from __future__ import annotations

import math
import mimetypes
from datetime import datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import FileResponse, HTMLResponse, RedirectResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined, select_autoescape

from api.deps import SessionDep, require_read_page
from api.schemas import RecommendationOut
from service.errors import NotFound
from service.state import state_of

from . import queries

HERE = Path(__file__).resolve().parent
TEMPLATES_DIR = HERE / "templates"
STATIC_DIR = HERE / "static"
MAX_ID = 2**31 - 1
PAGE_SIZE = 50
POLL_SECONDS = 3

# No inline script or style: the pages' own JavaScript and CSS come from /dashboard/static.
SECURITY_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'; "
        "form-action 'self'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class PageError(Exception):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


# --- template filters ----------------------------------------------------------------------------
def _num(value: Any, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:,.{digits}f}"


def _pvalue(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    if value < 0.001:
        return "<0.001"
    return f"{value:.3f}"


def _pexact(value: Any) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{value:.3g}"


def _pct(value: Any, digits: int = 1) -> str:
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "—"
    return f"{100 * value:.{digits}f} %"


def _dt(value: datetime | str | None) -> str:
    if value is None:
        return "—"
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            return value
    return value.strftime("%Y-%m-%d %H:%M UTC")


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "—"
    if seconds < 3600:
        return f"{seconds / 60:.0f} min"
    if seconds < 2 * 86400:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} days"


def _omega_class(value: float | None) -> str:
    """A colour bucket for an impact factor: green helps, red hurts (legend on the page)."""
    if value is None:
        return "om-none"
    if value >= 0.3:
        return "om-pos3"
    if value >= 0.1:
        return "om-pos2"
    if value >= 0:
        return "om-pos1"
    if value > -0.1:
        return "om-neg1"
    if value > -0.5:
        return "om-neg2"
    return "om-neg3"


def _flag_class(flag: str) -> str:
    if flag.startswith(("quality_gate_failed", "calibration_unusable", "stale_data")):
        return "flag-bad"
    if flag in ("provisional", "eq1_rtt_unknown", "pcdc_subset_unknown"):
        return "flag-warn"
    return "flag-info"


def _is_stream(rec) -> bool:
    """An answer for a stream objective: a sent answer (`RecommendationOut`) or a stored row."""
    if isinstance(rec, RecommendationOut):
        return rec.objective.is_stream
    return bool((rec.inputs or {}).get("objective"))


env = Environment(
    loader=FileSystemLoader(str(TEMPLATES_DIR)),
    autoescape=select_autoescape(enabled_extensions=("html",), default_for_string=True),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
env.tests["match_prefix"] = lambda value, prefix: str(value).startswith(prefix)
env.filters.update(
    num=_num,
    pvalue=_pvalue,
    pexact=_pexact,
    pct=_pct,
    dt=_dt,
    age=_age,
    omega_class=_omega_class,
    flag_class=_flag_class,
    state=state_of,  # a campaign row's typed state: `(campaign|state).budget`
    is_stream=_is_stream,
)


def render(request: Request, name: str, status: int = 200, **context: Any) -> HTMLResponse:
    root = request.scope.get("root_path", "").rstrip("/")
    html = env.get_template(name).render(
        root=root, dash=f"{root}/dashboard", poll_seconds=POLL_SECONDS, **context
    )
    return HTMLResponse(html, status_code=status, headers=SECURITY_HEADERS)


def error_page(request: Request, status: int, message: str) -> HTMLResponse:
    titles = {400: "Bad request", 404: "Not found"}
    return render(
        request, "error.html", status=status, title=titles.get(status, "Error"), message=message
    )


# --- parameters: bad values are an HTML page, never a JSON 422 or a 500 ------------------------
def _id(value: str | None, what: str) -> int:
    if value is None or not value.isdigit() or len(value) > 10 or not 1 <= int(value) <= MAX_ID:
        raise PageError(404, f"There is no {what} {value!r}.")
    return int(value)


def _optional_id(request: Request, name: str, what: str) -> int | None:
    value = request.query_params.get(name)
    if value in (None, ""):
        return None
    return _id(value, what)


def _page_number(request: Request) -> int:
    value = request.query_params.get("page", "1") or "1"
    if not value.isdigit() or len(value) > 6 or int(value) < 1:
        raise PageError(400, f"page must be a positive whole number, got {value!r}.")
    return int(value)


def _delta(request: Request) -> float | None:
    value = request.query_params.get("delta")
    if value in (None, ""):
        return None
    try:
        delta = float(value)
    except ValueError:
        delta = math.nan
    if not (math.isfinite(delta) and 0 <= delta < 1):
        raise PageError(400, f"delta must be a number in [0, 1), got {value!r}.")
    return delta


def _pair(topology) -> str:
    return f"{topology.local_site.name} → {topology.remote_site.name}"


def _guard(request: Request, build) -> HTMLResponse:
    try:
        return build()
    except PageError as exc:
        return error_page(request, exc.status, exc.message)
    except NotFound as exc:
        return error_page(request, 404, exc.message[:1].upper() + exc.message[1:] + ".")


router = APIRouter(include_in_schema=False, dependencies=[Depends(require_read_page)])


@router.get("/dashboard")
def dashboard_root(request: Request):
    root = request.scope.get("root_path", "").rstrip("/")
    return RedirectResponse(f"{root}/dashboard/", status_code=308)


@router.get("/dashboard/", response_class=HTMLResponse)
def index(request: Request, session: SessionDep):
    return _guard(
        request,
        lambda: render(request, "index.html", title="Topologies", **queries.overview(session)),
    )


@router.get("/dashboard/topologies/{topology_id}", response_class=HTMLResponse)
def topology(request: Request, topology_id: str, session: SessionDep):
    def build():
        data = queries.topology_page(session, _id(topology_id, "topology"))
        title = _pair(data["topology"])
        return render(request, "topology.html", tab="topology", title=title, **data)

    return _guard(request, build)


@router.get("/dashboard/topologies/{topology_id}/impact", response_class=HTMLResponse)
def impact(request: Request, topology_id: str, session: SessionDep):
    def build():
        view = queries.impact_page(
            session,
            _id(topology_id, "topology"),
            _optional_id(request, "campaign_id", "campaign"),
        )
        return render(
            request,
            "impact.html",
            tab="impact",
            title=f"Impact factors · {_pair(view.topology)}",
            topology=view.topology,
            view=view,
        )

    return _guard(request, build)


@router.get("/dashboard/topologies/{topology_id}/fits", response_class=HTMLResponse)
def fits(request: Request, topology_id: str, session: SessionDep):
    def build():
        data = queries.fits_page(
            session,
            _id(topology_id, "topology"),
            _optional_id(request, "campaign_id", "campaign"),
            _delta(request),
        )
        title = f"Fits · {_pair(data['topology'])}"
        return render(request, "fits.html", tab="fits", title=title, **data)

    return _guard(request, build)


@router.get("/dashboard/topologies/{topology_id}/recommendations", response_class=HTMLResponse)
def recommendations(request: Request, topology_id: str, session: SessionDep):
    def build():
        page = _page_number(request)
        data = queries.recommendations_page(
            session, _id(topology_id, "topology"), PAGE_SIZE, (page - 1) * PAGE_SIZE
        )
        pages = max(1, math.ceil(data["total"] / PAGE_SIZE))
        if page > pages:
            raise PageError(404, f"There is no page {page}; there are {pages}.")
        return render(
            request,
            "recommendations.html",
            tab="recommendations",
            page=page,
            pages=pages,
            title=f"Recommendations · {_pair(data['topology'])}",
            **data,
        )

    return _guard(request, build)


@router.get("/dashboard/recommendations/{recommendation_id}", response_class=HTMLResponse)
def recommendation(request: Request, recommendation_id: str, session: SessionDep):
    def build():
        data = queries.recommendation_page(session, _id(recommendation_id, "recommendation"))
        title = f"Recommendation #{data['rec'].id}"
        return render(request, "recommendation.html", tab="recommendations", title=title, **data)

    return _guard(request, build)


@router.get("/dashboard/campaigns/{campaign_id}", response_class=HTMLResponse)
def campaign(request: Request, campaign_id: str, session: SessionDep):
    def build():
        data = queries.campaign_page(session, _id(campaign_id, "campaign"))
        title = f"Campaign #{data['campaign'].id}"
        return render(request, "campaign.html", tab="campaigns", title=title, **data)

    return _guard(request, build)


@router.get("/dashboard/measurements/{measurement_id}", response_class=HTMLResponse)
def probe(request: Request, measurement_id: str, session: SessionDep):
    def build():
        data = queries.probe_page(session, _id(measurement_id, "probe"))
        title = f"Probe #{data['measurement'].id}"
        return render(request, "probe.html", tab="campaigns", title=title, **data)

    return _guard(request, build)


# Static files are the same for everyone (the login page needs them too): no session.
static_router = APIRouter(include_in_schema=False)


@static_router.get("/dashboard/static/{path:path}")
def static(request: Request, path: str):
    if "\x00" in path:  # a NUL cannot name a file; Path.resolve would raise ValueError
        return error_page(request, 404, "There is no such file.")
    target = (STATIC_DIR / path).resolve()
    if not target.is_relative_to(STATIC_DIR) or not target.is_file():
        return error_page(request, 404, "There is no such file.")
    media_type = mimetypes.guess_type(target.name)[0] or "application/octet-stream"
    if target.suffix == ".js":
        media_type = "text/javascript"
    return FileResponse(
        target,
        media_type=media_type,
        headers={"Cache-Control": "max-age=3600", "X-Content-Type-Options": "nosniff"},
    )


@router.get("/dashboard/{rest:path}", response_class=HTMLResponse)
def not_found(request: Request, rest: str):
    return error_page(request, 404, "There is no such dashboard page.")
