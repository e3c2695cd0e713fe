#!/bin/bash
# usage: pgc1-ab.sh TAG ROUNDS SECONDS PATHS BIN1 BIN2 ...
tag=$1; rounds=$2; secs=$3; paths=$4; shift 4
export SWITCHBOARD_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:$(cat /tmp/pgc1-pgport)/postgres
export B1_BACKENDS=postgres B1_CONCURRENCY=${CONC:-1} B1_SECONDS=$secs B1_REPEATS=1 B1_PG_PRELOAD=${PRELOAD:-60000} B1_PATHS=$paths
out=/tmp/pgc1-runs/$tag.log; : > $out
for r in $(seq 1 $rounds); do
  for bin in "$@"; do
    echo "== round $r bin $(basename $bin) load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $out
    $bin --bench 2>&1 | grep -E "^\[|rror" >> $out
  done
done
echo "== end load $(cut -d' ' -f1-3 /proc/loadavg) $(date -u +%T)" >> $out
