"""The operators' dashboard (issue 6): server-rendered pages under /dashboard/."""

from .routes import router

__all__ = ["router"]
