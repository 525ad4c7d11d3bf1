"""Alembic migrations of the mpcoa schema (`mpcoa db upgrade` or `alembic upgrade head`)."""
