-- PostgreSQL: the agent loop's tables keep their value checks as domains,
-- not as table CHECK constraints (issue 14; docs/decisions.md, "Value checks
-- as domains").
--
-- PostgreSQL rebuilds a table's CHECK constraints from their stored text on
-- every statement that writes the table, prepared or not: the expressions
-- are parsed (`stringToNode`), planned and compiled into the executor state
-- of that one execution. A claim → complete loop writes `todos` twice and
-- `todo_attempts` twice, two checks each: eight parses per loop, ~4 % of
-- PostgreSQL's CPU per loop (perf at c = 16: `pg_strtok`, `strtoll`,
-- `nodeRead`, `parseNodeString`). A domain's checks are parsed once per
-- connection into its type cache and reused. The values allowed are the
-- same; a column of a domain type reaches clients as its base type
-- (PostgreSQL sends the base type's OID), so no query or decoder changes.
-- The column changes rewrite both tables and rebuild their indexes, once.

CREATE DOMAIN todo_state AS TEXT
    CHECK (VALUE IN ('pending', 'claimed', 'done', 'failed', 'cancelled'));
CREATE DOMAIN todo_attempt_limit AS BIGINT CHECK (VALUE >= 1);
CREATE DOMAIN attempt_outcome AS TEXT
    CHECK (VALUE IN ('completed', 'failed', 'released', 'lease_expired', 'reaped', 'revoked',
                     'cancelled'));
CREATE DOMAIN attempt_disposition AS TEXT
    CHECK (VALUE IN ('done', 'retry_scheduled', 'requeued', 'dead_lettered', 'cancelled'));

ALTER TABLE todos
    DROP CONSTRAINT todos_state_check,
    DROP CONSTRAINT todos_max_attempts_check,
    ALTER COLUMN state TYPE todo_state,
    ALTER COLUMN max_attempts TYPE todo_attempt_limit;

ALTER TABLE todo_attempts
    DROP CONSTRAINT todo_attempts_outcome_check,
    DROP CONSTRAINT todo_attempts_disposition_check,
    ALTER COLUMN outcome TYPE attempt_outcome,
    ALTER COLUMN disposition TYPE attempt_disposition;
