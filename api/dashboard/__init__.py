"""The operators' dashboard: server-rendered pages under /dashboard/."""

from .login import router as login_router
from .routes import router, static_router

__all__ = ["login_router", "router", "static_router"]
