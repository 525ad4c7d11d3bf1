"""Scheduling: recalibration schedules, warm checks of a calibrated answer, and beat's jobs in
the API process when there is no broker."""
