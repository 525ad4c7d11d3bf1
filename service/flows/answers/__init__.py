"""Answers: a question in, OPM / OCC / OBS / OTP out -- calibrated, stream or provisional,
stored, cached and sent."""
