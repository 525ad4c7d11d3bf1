"""The probe tools this package ships, each described once (`probes.tools.protocol.ProbeTool`)
and registered as its module is imported (`probes.tools.registry` imports them all)."""
