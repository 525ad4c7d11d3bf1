"""SQLAlchemy 2 tables of mpcoa. Imports nothing else of the project."""

from .base import Base, JSONType, UTCDateTime, utcnow
from .history import EVENT_KINDS, RecalibrationEvent, RecalibrationSchedule
from .sites import SiteLock
from .tables import (
    ACTIVE_CAMPAIGN_STATES,
    CAMPAIGN_STATES,
    FINAL_CAMPAIGN_STATES,
    ISP,
    MEASUREMENT_PHASES,
    MEASUREMENT_STATUSES,
    NO_EXCLUSION,
    RECOMMENDATION_KINDS,
    TOKEN_SCOPES,
    ApiToken,
    Campaign,
    FitRecord,
    ImpactFactor,
    Measurement,
    Recommendation,
    Site,
    Subflow,
    Topology,
)

__all__ = [
    "ACTIVE_CAMPAIGN_STATES",
    "CAMPAIGN_STATES",
    "EVENT_KINDS",
    "FINAL_CAMPAIGN_STATES",
    "ISP",
    "MEASUREMENT_PHASES",
    "MEASUREMENT_STATUSES",
    "NO_EXCLUSION",
    "RECOMMENDATION_KINDS",
    "TOKEN_SCOPES",
    "ApiToken",
    "Base",
    "Campaign",
    "FitRecord",
    "ImpactFactor",
    "JSONType",
    "Measurement",
    "RecalibrationEvent",
    "RecalibrationSchedule",
    "Recommendation",
    "Site",
    "SiteLock",
    "Subflow",
    "Topology",
    "UTCDateTime",
    "utcnow",
]
