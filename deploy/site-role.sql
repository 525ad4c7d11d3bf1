-- The site hosts' database role (docs/deploy.md, sections 3 and 5): what a site worker reads and
-- writes, nothing more. Run by a superuser or the database's owner, after every
-- `mpcoa db upgrade` (a new table is nobody's until it is listed here):
--   psql -v ON_ERROR_STOP=1 -d mpcoa -v site_role=mpcoa_site < deploy/site-role.sql
-- Every table of the schema is named below, with what the role may do with it (tests check that
-- none is missing, and what a site worker's credentials can and cannot do).

BEGIN;
REVOKE ALL ON ALL TABLES IN SCHEMA public FROM :"site_role";
REVOKE ALL ON ALL SEQUENCES IN SCHEMA public FROM :"site_role";
REVOKE CREATE ON SCHEMA public FROM :"site_role";
GRANT USAGE ON SCHEMA public TO :"site_role";
-- the ids of the rows it inserts
GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO :"site_role";

-- what the probes need to know: the sites, their ISPs and the topology's subflows
GRANT SELECT ON sites, isps, topologies, subflows TO :"site_role";
-- a campaign's turns run on its sender site's worker: its state, lease and progress, its
-- probes' measurements and raw outputs, the two-sided probes' sessions, the sites it holds
GRANT SELECT, UPDATE ON campaigns TO :"site_role";
GRANT SELECT, INSERT ON measurements, measurement_artifacts TO :"site_role";
GRANT SELECT, INSERT, UPDATE ON probe_sessions, site_locks TO :"site_role";
-- the finishing turn: Omega and the fits, the answer, the change events of a recalibration
GRANT SELECT, INSERT, DELETE ON impact_factors, fits TO :"site_role";
GRANT SELECT, INSERT ON recommendations, recalibration_events TO :"site_role";
GRANT SELECT, UPDATE ON answer_generation TO :"site_role";
GRANT SELECT ON recalibration_schedules TO :"site_role";
-- the site's capability report, and its side of an apply (a recalibration's re-apply inserts)
GRANT SELECT, INSERT, UPDATE ON site_capabilities TO :"site_role";
GRANT SELECT, INSERT, UPDATE ON applied_answers TO :"site_role";

-- none: the API's tokens and dashboard logins (a site host can mint no token, read no login),
-- the embedded scheduler's lease, the schema's version
-- (api_tokens, browser_sessions, scheduler_lease, alembic_version)
COMMIT;
