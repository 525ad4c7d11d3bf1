"""Pure ASGI middleware that answers before the application reads a request body: when bodies
were read first, four unauthenticated 12.8 MB bodies took GET /health from 0.04 s to 4 s.

- `WriteGate`: a write (POST/PUT/PATCH/DELETE) without a live API token is 401 before anything
  reads or parses its body. The endpoints' own dependency checks the token again (the
  authoritative check: revocation, expiry, scope); the gate remembers tokens it found live for a
  few seconds so that it costs one SHA-256 and a dict lookup per request.
- `BodyLimit`: a body over the cap is 413, from its Content-Length before reading, or as soon as
  the streamed chunks pass the cap.
- `MethodGate`: a method a known path does not have is 405 with `Allow` listing every method the
  path has, before the token gate (a `PUT /health` is no question of credentials). Starlette's
  own 405 names the methods of one route only, while a path here is often several routes.
"""

from __future__ import annotations

import re
import time
from functools import lru_cache

from fastapi.routing import iter_route_contexts
from sqlalchemy.exc import SQLAlchemyError
from starlette.exceptions import HTTPException
from starlette.routing import Mount, compile_path
from starlette.types import ASGIApp, Receive, Scope, Send

from api import problems
from api.deps import in_lane  # the lane of the endpoints' own token checks
from service.store import tokens

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
# Writes that carry their credential in the body (the dashboard's login form) or need none.
OPEN_WRITES = frozenset({"/dashboard/login", "/dashboard/logout"})
LIVE_TOKEN_TTL_S = 10.0


async def send_problem(send: Send, status: int, detail: str,
                       headers: dict[str, str] | None = None):
    """An RFC 9457 problem (api.problems), sent before FastAPI has the request."""
    payload = problems.encoded(status, detail)
    raw = [(b"content-type", problems.MEDIA_TYPE.encode()),
           (b"content-length", str(len(payload)).encode())]
    raw += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    # The client may still be sending a body nobody reads: close the connection after this.
    raw.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": raw})
    await send({"type": "http.response.body", "body": payload})


def _header(scope: Scope, name: bytes) -> str | None:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return None


def bearer_token(scope: Scope) -> str | None:
    value = _header(scope, b"authorization") or ""
    scheme, _, token = value.partition(" ")
    return token.strip() if scheme.lower() == "bearer" and token.strip() else None


class WriteGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._live: dict[str, float] = {}  # token hash -> monotonic time it was last found live

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if (scope["type"] != "http" or scope["method"] not in WRITE_METHODS
                or scope["path"] in OPEN_WRITES):
            return await self.app(scope, receive, send)
        token = bearer_token(scope)
        if token is None or not await self._live_token(scope, token):
            return await send_problem(
                send, 401, "a valid API token is needed (Authorization: Bearer <token>)",
                {"WWW-Authenticate": "Bearer"},
            )
        await self.app(scope, receive, send)

    async def _live_token(self, scope: Scope, token: str) -> bool:
        digest = tokens.hash_token(token)
        seen = self._live.get(digest)
        if seen is not None and time.monotonic() - seen < LIVE_TOKEN_TTL_S:
            return True
        try:
            live = await in_lane("auth", _verify, scope["app"].state.session_factory, token)
        except SQLAlchemyError:
            return True  # the database is down: let the endpoint answer 503 for it
        if live:
            if len(self._live) > 10_000:
                self._live.clear()
            self._live[digest] = time.monotonic()
        return live


def _verify(session_factory, token: str) -> bool:
    with session_factory() as session:
        return tokens.verify_token(session, token=token) is not None


class BodyTooLarge(HTTPException):
    """Raised from `receive`: FastAPI re-raises HTTPException from its body reading, and its
    handler answers 413 in JSON."""

    def __init__(self, limit: int) -> None:
        super().__init__(413, f"the request body is larger than {limit} bytes")


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        length = _header(scope, b"content-length")
        if length is not None and (not length.isdigit() or int(length) > self.max_bytes):
            return await send_problem(
                send, 413, f"the request body is larger than {self.max_bytes} bytes"
            )
        received = 0
        started = False

        async def limited_receive():
            nonlocal received
            message = await receive()
            if message["type"] == "http.request":
                received += len(message.get("body", b""))
                if received > self.max_bytes:
                    raise BodyTooLarge(self.max_bytes)
            return message

        async def watched_send(message):
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, limited_receive, watched_send)
        except BodyTooLarge as exc:  # read outside FastAPI's body handling (a form, a raw read)
            if started:
                raise
            await send_problem(send, 413, exc.detail)


def route_table(routes) -> list[tuple[re.Pattern[str], frozenset[str] | None]]:
    """Every route's path pattern and methods (None: any method, as a mount of static files
    takes), included routers flattened as FastAPI's own OpenAPI builder walks them."""
    table: list[tuple[re.Pattern[str], frozenset[str] | None]] = []
    for context in iter_route_contexts(routes):
        route = context.original_route
        if isinstance(route, Mount):
            prefix = re.escape(route.path.rstrip("/"))
            table.append((re.compile(f"^{prefix}(/.*)?$"), None))
        elif context.path:
            methods = context.methods
            table.append((compile_path(context.path)[0],
                          frozenset(methods) if methods else None))
    return table


def allowed_methods(table, path: str) -> frozenset[str] | None:
    """The methods the routes have for `path`, or None when the path is none of theirs or a
    route of it takes any method (the static files answer for themselves)."""
    methods: set[str] = set()
    for pattern, route_methods in table:
        if pattern.match(path):
            if route_methods is None:
                return None
            methods |= route_methods
    return frozenset(methods) or None


class MethodGate:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app
        self._allowed = None  # per path, once the application's routes are known

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if self._allowed is None:
            table = route_table(scope["app"].routes)

            # paths carry ids: bounded, and a path seen before costs one lookup
            @lru_cache(maxsize=4096)
            def allowed(path: str) -> frozenset[str] | None:
                return allowed_methods(table, path)

            self._allowed = allowed
        path, root = scope["path"], scope.get("root_path", "")
        if root and path.startswith(root):
            path = path[len(root):]
        methods = self._allowed(path)
        if methods is not None and scope["method"] not in methods:
            listed = ", ".join(sorted(methods))
            return await send_problem(
                send, 405, f"{scope['method']} is not a method of this path; it has {listed}",
                {"Allow": listed})
        await self.app(scope, receive, send)
