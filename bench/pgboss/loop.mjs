// pg-boss beside B1/B2 (09-quality.md, B2 amended): C workers each run
// `fetch -> complete` on one queue for SECONDS, on the same throwaway
// PostgreSQL cluster scripts/bench starts, from a preloaded queue.
// pg-boss runs with its defaults (its own pool of max C + 2 connections,
// supervision on), in a schema of its own that is dropped first, so every
// run starts alike.
//
// Environment: PGBOSS_URL (required), PGBOSS_CONCURRENCY (default 4),
// PGBOSS_SECONDS (default 30), PGBOSS_PRELOAD (default 2 500 per second).
// Prints one JSON line: loops, rate, first and last fifth's rate, and the
// check (no job completed twice, none lost).
import { PgBoss } from 'pg-boss';
import pg from 'pg';

const url = process.env.PGBOSS_URL;
if (!url) {
  console.error('PGBOSS_URL is required');
  process.exit(2);
}
const concurrency = Number(process.env.PGBOSS_CONCURRENCY ?? 4);
const seconds = Number(process.env.PGBOSS_SECONDS ?? 30);
const preload = Number(process.env.PGBOSS_PRELOAD ?? seconds * 2500);
const schema = 'pgboss_bench';
const queue = 'bench';

const admin = new pg.Client({ connectionString: url });
await admin.connect();
await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);

const boss = new PgBoss({ connectionString: url, schema, max: concurrency + 2 });
boss.on('error', (e) => console.error('pg-boss error:', e.message));
await boss.start();
await boss.createQueue(queue);

for (let done = 0; done < preload; done += 1000) {
  const n = Math.min(1000, preload - done);
  await boss.insert(
    queue,
    Array.from({ length: n }, (_, i) => ({ data: { i: done + i } })),
  );
}
await admin.query('CHECKPOINT');

const seen = new Set();
let loops = 0;
let dry = false;
let twice = 0;
const started = performance.now();
const deadline = started + seconds * 1000;
const progress = [0];
const ticker = setInterval(() => progress.push(loops), 1000);

async function worker() {
  while (performance.now() < deadline && !dry) {
    const [job] = await boss.fetch(queue);
    if (!job) {
      dry = true;
      break;
    }
    await boss.complete(queue, job.id);
    if (seen.has(job.id)) twice += 1;
    seen.add(job.id);
    loops += 1;
  }
}

await Promise.all(Array.from({ length: concurrency }, worker));
clearInterval(ticker);
const secs = (performance.now() - started) / 1000;
const n = progress.length - 1;
const w = Math.max(1, Math.floor(n / 5));
const first = n > 0 ? (progress[w] - progress[0]) / w : NaN;
const last = n > 0 ? (progress[n] - progress[n - w]) / w : NaN;

// pg-boss keeps completed jobs in its job table (until its retention).
const { rows } = await admin.query(
  `SELECT count(*) FILTER (WHERE state = 'completed')::int AS completed,
          count(*)::int AS total FROM ${schema}.job WHERE name = $1`,
  [queue],
);
await boss.stop({ graceful: false, wait: true });
await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
await admin.end();

const problems = [];
if (dry) problems.push(`the ${preload} preloaded jobs ran out; raise PGBOSS_PRELOAD`);
if (twice) problems.push(`${twice} jobs were fetched twice`);
if (rows[0].completed !== loops) {
  problems.push(`${rows[0].completed} jobs are completed but the workers completed ${loops}`);
}
if (rows[0].total !== preload) problems.push(`${rows[0].total} jobs of ${preload} are left`);
console.log(
  JSON.stringify({
    concurrency,
    seconds: secs,
    loops,
    rate: loops / secs,
    first,
    last,
    preload,
    ok: problems.length === 0,
    problems,
  }),
);
process.exit(problems.length === 0 ? 0 : 1);
