// The queue page's charts in Debian's Chromium (playwright-core): an open
// page whose charts fill in by themselves, without a reload, as an agent
// works through a queue over MCP; the range picker; the push form; light,
// dark and phone width. Run by tests/it/board/queues.rs against a real
// `switchboard serve --activity-interval 200ms`.
//
// Environment: BOARD_URL, TOKEN (an sbh_ token), SLUG (its endpoint with
// the queues inbox and ci), CREDENTIAL (the endpoint's sbk_ credential),
// SHOTS, CHROMIUM. Prints a JSON summary as its last line.
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing ${name}`);
  return v;
};
const BASE = env('BOARD_URL');
const TOKEN = env('TOKEN');
const SLUG = env('SLUG');
const CREDENTIAL = env('CREDENTIAL');
const SHOTS = env('SHOTS');
mkdirSync(SHOTS, { recursive: true });

const done = [];
const check = (name) => { done.push(name); console.log(`ok ${name}`); };
const assert = (cond, what) => { if (!cond) throw new Error(`assertion failed: ${what}`); };

async function api(method, path, body) {
  const res = await fetch(BASE + path, {
    method,
    headers: { authorization: `Bearer ${TOKEN}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

/// A minimal MCP client over Streamable HTTP: what the agent does.
async function mcpSession() {
  const url = `${BASE}/mcp/${SLUG}`;
  const headers = {
    authorization: `Bearer ${CREDENTIAL}`,
    'content-type': 'application/json',
    accept: 'application/json, text/event-stream',
  };
  const init = await fetch(url, {
    method: 'POST', headers,
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'queues.mjs', version: '1' } } }),
  });
  assert(init.status === 200, `initialize answers 200 (got ${init.status})`);
  await init.text();
  const session = init.headers.get('mcp-session-id');
  const withSession = { ...headers, 'mcp-session-id': session };
  await (await fetch(url, { method: 'POST', headers: withSession,
    body: JSON.stringify({ jsonrpc: '2.0', method: 'notifications/initialized' }) })).text();
  let id = 10;
  return async (name, args) => {
    const res = await fetch(url, { method: 'POST', headers: withSession,
      body: JSON.stringify({ jsonrpc: '2.0', id: ++id, method: 'tools/call', params: { name, arguments: args } }) });
    const text = await res.text();
    // The answer may come as JSON or as one SSE event.
    const json = JSON.parse(text.startsWith('{') ? text : text.split('\n').find((l) => l.startsWith('data:')).slice(5));
    assert(!json.error && !json.result.isError, `${name} succeeds: ${text}`);
    return json.result.structuredContent;
  };
}

const legend = (page, chart, series) =>
  page.locator(`#${chart} [data-series="${series}"]`).textContent();

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  page.on('console', (m) => { if (m.type() === 'error') problems.push(`console: ${m.text()}`); });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.setDefaultTimeout(10_000);

  await page.goto(BASE + '/');
  await page.fill('#token', TOKEN);
  await Promise.all([page.waitForURL(BASE + '/'), page.click('button[type=submit]')]);
  check('sign-in');

  // The page of one queue, before anything happened.
  await page.goto(`${BASE}/board/queues?endpoint=${SLUG}&queue=inbox`);
  assert((await page.textContent('#activity-scope')).trim() === `${SLUG} / inbox`, 'the charts name their scope');
  assert(await page.locator('#chart-throughput .empty').count() === 1, 'an empty range says so');
  assert((await legend(page, 'chart-throughput', 'created')).trim() === '0', 'nothing created yet');
  check('empty');

  // The agent works while the page stays open: 3 created in inbox (1 in ci,
  // which this chart leaves out), 2 completed, 1 failed (its retry waits).
  for (const title of ['one', 'two']) {
    const r = await api('POST', `/api/v1/endpoints/${SLUG}/todos`, { title, queue: 'inbox' });
    assert(r.status === 201, `push ${title}: ${r.status}`);
  }
  assert((await api('POST', `/api/v1/endpoints/${SLUG}/todos`, { title: 'three', queue: 'inbox' })).status === 201, 'push three');
  assert((await api('POST', `/api/v1/endpoints/${SLUG}/todos`, { title: 'elsewhere', queue: 'ci' })).status === 201, 'push to ci');
  const call = await mcpSession();
  for (const n of [1, 2]) {
    const claimed = await call('claim_next', { queue: 'inbox' });
    assert(claimed.todo, `claim ${n}: ${JSON.stringify(claimed)}`);
    await call('complete', { id: claimed.todo.id, result: { n } });
  }
  const third = await call('claim_next', { queue: 'inbox' });
  await call('fail', { id: third.todo.id, result: { error: 'no luck' } });

  // No reload: the live region refreshes itself.
  await page.waitForFunction(() => {
    const text = (s) => document.querySelector(`#chart-throughput [data-series="${s}"]`)?.textContent.trim();
    return text('created') === '3' && text('completed') === '2' && text('failed') === '1' && text('dead-lettered') === '0';
  }, null, { timeout: 30_000 });
  assert(await page.locator('#chart-throughput path.s-created').count() === 1, 'the created line is drawn');
  assert(await page.locator('#chart-latency path.s-complete:not(.p95)').count() === 1, 'the time-to-complete line is drawn');
  const p50 = (await legend(page, 'chart-latency', 'complete p50')).trim();
  assert(/^\d+(\.\d)? (ms|s|min)$/.test(p50), `time to complete p50 reads as a duration: ${p50}`);
  assert((await page.locator('#activity-table tbody tr').count()) >= 1, 'the numbers table lists the busy interval');
  check('live-charts');

  // The whole endpoint counts ci too; the week range reads hour buckets.
  await page.goto(`${BASE}/board/queues?endpoint=${SLUG}&range=week`);
  assert((await legend(page, 'chart-throughput', 'created')).trim() === '4', 'the endpoint chart counts every queue');
  assert((await page.textContent('.ranges a.current')).trim() === 'Last week', 'the range picker shows the range');
  const cells = await page.locator('#queue-table tr[data-queue="inbox"] td.n').allTextContents();
  assert(cells.join(',') === '0,0,1,0', `inbox: no pending, none in flight, one retrying, no dead letter (${cells})`);
  check('ranges');

  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.goto(`${BASE}/board/queues?endpoint=${SLUG}&queue=inbox`);
    await page.screenshot({ path: `${SHOTS}/queues-${scheme}.png`, fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
  check('schemes');

  // The push form of the chosen queue comes back to its charts.
  await page.fill('#push-title', 'from the queue page');
  await page.fill('#push-priority', '5');
  await Promise.all([page.waitForURL(/\/board\/queues\?/), page.click('#push-submit')]);
  assert(page.url().includes(`endpoint=${SLUG}`) && page.url().includes('queue=inbox'), `back at the queue: ${page.url()}`);
  assert((await page.textContent('.notice, [role=status]')).includes('pushed'), 'the push is confirmed');
  const listed = await api('GET', `/api/v1/todos?endpoint=${SLUG}&state=pending`);
  const pushed = listed.json.todos.find((t) => t.title === 'from the queue page');
  assert(pushed && pushed.priority === 5 && pushed.queue === 'inbox', `pushed with its priority: ${JSON.stringify(pushed)}`);
  check('push');

  // Phone width: the page does not scroll sideways; the charts shrink.
  await page.setViewportSize({ width: 390, height: 800 });
  await page.goto(`${BASE}/board/queues?endpoint=${SLUG}&queue=inbox`);
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 1, `no sideways scroll at 390 px (${overflow} px)`);
  const width = await page.evaluate(() => document.querySelector('#chart-throughput svg.plot').getBoundingClientRect().width);
  assert(width <= 390, `the chart fits (${width} px)`);
  await page.screenshot({ path: `${SHOTS}/queues-phone.png`, fullPage: true });
  check('phone-width');

  assert(problems.length === 0, `no console errors: ${problems.join('; ')}`);
  console.log(JSON.stringify({ ok: true, checks: done }));
} catch (e) {
  console.error(e.stack || String(e));
  console.log(JSON.stringify({ ok: false, checks: done, error: String(e) }));
  process.exitCode = 1;
} finally {
  await browser.close();
}
