"""Property-based run of every operation in the OpenAPI spec: no input may give a 500.

Bounded for CI (a few examples per operation), with a write token so writes get past auth.
Checks: no server error, and every documented response matches its schema.
"""

from __future__ import annotations

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from service.settings import Settings

pytestmark = pytest.mark.postgres



class _Sessions:
    """The app is built once for the spec; each test points it at its own rolled-back connection."""

    factory = None

    def __call__(self):
        return self.factory()


_sessions = _Sessions()
app = create_app(
    # reads open: the spec is loaded without a token (the calls carry one)
    Settings(database_url="postgresql+psycopg://set-per-test", run_campaigns=False,
             reads_need_token=False, _env_file=None),
    session_factory=_sessions,
)
schema = schemathesis.openapi.from_asgi("/openapi.json", app)


@pytest.fixture(autouse=True)
def _bind_sessions(session_factory):
    _sessions.factory = session_factory
    yield
    _sessions.factory = None


@schema.parametrize()
@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=list(HealthCheck),
    derandomize=True,
)
def test_no_server_error(case, auth):
    case.call_and_validate(
        headers=auth,
        checks=[
            not_a_server_error,
            status_code_conformance,
            content_type_conformance,
            response_schema_conformance,
        ],
    )
