#!/bin/bash
# pgbench variants of the store's two statements vs the true floor, c=1
port=$(cat /tmp/pgc1-pgport); ep=$(cat /tmp/pgc1-ep)
P="psql -h 127.0.0.1 -p $port -U postgres -X -q"
cols="id, endpoint_id, queue, title, kind, source, payload, idempotency_key, event_id, state, owner, lease_expires_at, lease_token_hash, attempt, max_attempts, attempts_total, attempts_pruned, next_retry_at, result, last_note, ring_attempts, last_ringed_at, created_at, updated_at, claimed_at, completed_at"
cat > /tmp/pgc1-store.pgb <<SQL
WITH c AS (UPDATE todos SET state = 'claimed', owner = 'o1', lease_expires_at = 99999999999999, lease_token_hash = NULL, attempt = attempt + 1, attempts_total = attempts_total + 1, claimed_at = 1, updated_at = 1, next_retry_at = NULL, last_note = NULL WHERE id = (SELECT id FROM todos WHERE endpoint_id = '$ep' AND state = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING $cols), a AS (INSERT INTO todo_attempts (todo_id, seq, attempt, claimant, claimed_at) SELECT id, attempts_total, attempt, NULL, 1 FROM c) SELECT $cols FROM c \gset
WITH d AS (UPDATE todos SET state = 'done', result = NULL, completed_at = 2, updated_at = 2, lease_expires_at = NULL, lease_token_hash = NULL WHERE id = :id AND endpoint_id = '$ep' AND state = 'claimed' AND owner = 'o1' AND (lease_token_hash IS NULL OR lease_token_hash = NULL) RETURNING $cols), a AS (UPDATE todo_attempts SET ended_at = 2, outcome = 'completed', disposition = 'done', summary = NULL, summary_truncated = 0 WHERE todo_id = (SELECT id FROM d) AND ended_at IS NULL) SELECT $cols FROM d \gset x_
SQL

cat > /tmp/pgc1-floor.pgb <<SQL
UPDATE floor_todos SET state = 'claimed', owner = 'o1', lease_expires_at = 99999999999999, attempts = attempts + 1 WHERE id = (SELECT id FROM floor_todos WHERE endpoint_id = '$ep' AND queue = 'inbox' AND state = 'pending' ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING id \gset
UPDATE floor_todos SET state = 'done', completed_at = 2, lease_expires_at = NULL WHERE id = :id AND state = 'claimed' AND owner = 'o1';
SQL
setup() { # db extra-sql
  $P -c "DROP DATABASE IF EXISTS $1" -c "CREATE DATABASE $1" postgres
  $P -f /tmp/pgc1-schema.sql $1 >/dev/null 2>&1
  $P -f /tmp/pgc1-reg.sql $1 >/dev/null 2>&1
  [ -n "$2" ] && $P -c "$2" $1
}
reset() { # db
  $P -c "TRUNCATE todo_attempts, todos" -c "TRUNCATE floor_todos" \
     -c "INSERT INTO todos (id, endpoint_id, queue, title, state, max_attempts, created_at, updated_at) SELECT 'td_' || lpad(to_hex(i), 32, '0'), '$ep', 'inbox', 'bench todo ' || i, 'pending', 5, 1000 + i, 1000 + i FROM generate_series(1::bigint, 60000::bigint) AS s(i)" \
     -c "INSERT INTO floor_todos (id, endpoint_id, queue, state, created_at) SELECT 'td_' || lpad(to_hex(i), 32, '0'), '$ep', 'inbox', 'pending', 1000 + i FROM generate_series(1::bigint, 60000::bigint) AS s(i)" $1
  $P -c "VACUUM ANALYZE todos" $1; $P -c "VACUUM ANALYZE floor_todos" $1; $P -c CHECKPOINT $1
}
run() { # label db script
  reset $2
  r=$(/usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p $port -U postgres -n -c1 -T${SECS:-10} -M prepared -f $3 $2 2>&1 | grep -E "^tps|latency average")
  echo "$1 | load $(cut -d' ' -f1 /proc/loadavg) | $(echo $r | tr '\n' ' ')"
}
pgcpu() { # total CPU ticks of the throwaway cluster: live processes + reaped children (postmaster's cutime/cstime)
  local pm=$(head -1 $(cat /tmp/pgc1-pgdir)/data/postmaster.pid) t=0
  for p in $(pgrep -u postgres); do
    read -r -a f < /proc/$p/stat 2>/dev/null || continue
    # fields after the comm: use awk-safe parsing via rev trick
    s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null) || continue
    set -- $s
    t=$((t + ${12} + ${13}))
    [ "$p" = "$pm" ] && t=$((t + ${14} + ${15}))
  done
  echo $t
}
run() { # label db script
  reset $2
  local c0=$(pgcpu)
  r=$(/usr/lib/postgresql/15/bin/pgbench -h 127.0.0.1 -p $port -U postgres -n -c1 -T${SECS:-10} -M prepared -f $3 $2 2>&1 | grep -E "^tps|latency average|transactions actually")
  local c1=$(pgcpu)
  local n=$(echo "$r" | sed -n 's/number of transactions actually processed: //p')
  echo "$1 | load $(cut -d' ' -f1 /proc/loadavg) | tps $(echo "$r" | sed -n 's/^tps = \([0-9.]*\).*/\1/p') | lat $(echo "$r" | sed -n 's/latency average = //p') | PG CPU µs/loop $(( (c1 - c0) * 10000 / n ))"
}
pgcpu() {
  local pm=$(head -1 $(cat /tmp/pgc1-pgdir)/data/postmaster.pid) t=0 s
  for p in $pm $(pgrep -P $pm); do
    s=$(sed 's/.*) //' /proc/$p/stat 2>/dev/null) || continue
    set -- $s
    t=$((t + ${12} + ${13}))
    [ "$p" = "$pm" ] && t=$((t + ${14} + ${15}))
  done
  echo $t
}
