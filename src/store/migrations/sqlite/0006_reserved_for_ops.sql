-- PLACEHOLDER, perf branch only: version 6 belongs to the "ops" branch (the
-- `cancelled` todo state). It exists here only so that the versions stay
-- contiguous (the migration conformance test applies 1..=latest). At merge,
-- keep ops' 0006 and delete this file and its entry in migrate.rs.
SELECT 1;
