-- Retention walks the listings' index, and the index kept for it goes
-- (issue 14; docs/decisions.md, "Retention walks the listings' index"; the
-- same change as PostgreSQL's 0011, measured there). A completion writes one
-- index entry fewer on the single writer; the hourly retention sweep reads
-- `todos_by_endpoint_created` from a cursor instead.
DROP INDEX todos_terminal_by_age;
