// Drives the board in Debian's Chromium with playwright-core (no browser
// download). Run by tests/it/board/browser.rs against a real `switchboard
// serve`; every check throws on failure and the script exits 1.
//
// Environment: BOARD_URL, TOKEN_A / TOKEN_B (sbh_ tokens of two humans),
// SLUG_A (an endpoint of A), TODO_A (a todo of A whose payload holds
// markup), SHOTS (where screenshots go), CHROMIUM (default /usr/bin/chromium),
// BULK=1 when the bulk cancel forms exist, SLUG_UNHEARD (an endpoint seen,
// with pending work and no session).
import { chromium } from 'playwright-core';
import { mkdirSync } from 'node:fs';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing ${name}`);
  return v;
};
const BASE = env('BOARD_URL');
const TOKEN_A = env('TOKEN_A');
const TOKEN_B = env('TOKEN_B');
const SLUG_A = env('SLUG_A');
const TODO_A = env('TODO_A');
const CREDENTIAL_A = env('CREDENTIAL_A');
const SHOTS = env('SHOTS');
const SLUG_UNHEARD = env('SLUG_UNHEARD');
mkdirSync(SHOTS, { recursive: true });

const done = [];
const check = (name) => { done.push(name); console.log(`ok ${name}`); };
const assert = (cond, what) => { if (!cond) throw new Error(`assertion failed: ${what}`); };

async function api(method, path, token, body) {
  const res = await fetch(BASE + path, {
    method,
    headers: { authorization: `Bearer ${token}`, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});

/// A context with console errors, page errors and dialogs recorded.
async function open(name) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 860 } });
  const page = await context.newPage();
  page.problems = [];
  page.on('console', (m) => { if (m.type() === 'error') page.problems.push(`${name} console: ${m.text()}`); });
  page.on('pageerror', (e) => page.problems.push(`${name} page error: ${e.message}`));
  page.on('dialog', async (d) => { page.problems.push(`${name} dialog: ${d.message()}`); await d.dismiss(); });
  page.setDefaultTimeout(10_000);
  return { context, page };
}

async function signIn(page, token) {
  await page.goto(BASE + '/');
  assert(page.url().endsWith('/board/sign-in'), `unauthenticated / redirects to sign-in (at ${page.url()})`);
  await page.fill('#token', token);
  await Promise.all([page.waitForURL(BASE + '/'), page.click('button[type=submit]')]);
}

/// Visits a page and screenshots it in light and dark.
async function visit(page, path, shot) {
  const res = await page.goto(BASE + path);
  assert(res.status() === 200, `${path} answers 200 (got ${res.status()})`);
  // Lets htmx connect its SSE stream and apply the first refresh.
  await page.waitForLoadState('networkidle').catch(() => {});
  for (const scheme of ['light', 'dark']) {
    await page.emulateMedia({ colorScheme: scheme });
    await page.screenshot({ path: `${SHOTS}/${shot}-${scheme}.png`, fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
}

try {
  const { context, page } = await open('A');

  // --- sign-in -----------------------------------------------------------
  await page.goto(BASE + '/board/sign-in');
  await page.fill('#token', 'sbh_not-a-real-token');
  await page.click('button[type=submit]');
  await page.waitForSelector('#token-error');
  // That refusal is a 401, which Chromium logs as a failed load: expected.
  page.problems.length = 0;
  await signIn(page, TOKEN_A);
  const cookies = await context.cookies();
  const session = cookies.find((c) => c.name === 'sb_board');
  assert(session && session.httpOnly && session.sameSite === 'Strict', `the session cookie is HttpOnly and SameSite=Strict: ${JSON.stringify(session)}`);
  assert(session.value !== TOKEN_A, 'the cookie holds a new token, not the one typed');
  check('sign-in');

  // An MCP session of A's endpoint, as Claude Code would open it.
  const init = await fetch(`${BASE}/mcp/${SLUG_A}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${CREDENTIAL_A}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({
      jsonrpc: '2.0', id: 1, method: 'initialize',
      params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'claude-code', version: '2.1.80' } },
    }),
  });
  assert(init.status === 200, `MCP initialize answered ${init.status}`);
  await init.text();

  // --- every page renders, no console error, screenshots ------------------
  await visit(page, '/', 'overview');
  assert(await page.locator(`article[data-slug="${SLUG_A}"]`).count() === 1, 'the overview has a card for the endpoint');
  await visit(page, `/board/endpoints/${SLUG_A}`, 'endpoint');
  assert(await page.locator('text=claude-code 2.1.80').count() === 1, 'the session is listed with its client name');
  await visit(page, '/board/todos', 'todos');
  await visit(page, '/board/queues', 'queues');
  assert(await page.locator(`tr[data-endpoint="${SLUG_A}"]`).count() >= 2, 'the queues page has the endpoint and its queues');
  await visit(page, `/board/todos/${TODO_A}`, 'todo');
  const payload = await page.textContent('#payload');
  assert(payload.includes('<script>'), 'the payload is shown as text, escaped');
  await visit(page, '/board/agents', 'agents');
  await visit(page, '/board/tokens', 'tokens');
  await visit(page, '/board/vend', 'vend');
  await page.fill('#vend-agent', 'browser-vended');
  await Promise.all([page.waitForLoadState('load'), page.click('#vend-submit')]);
  const credential = (await page.textContent('#snippet-token')).trim();
  assert(credential.startsWith('sbk_'), `the credential is revealed once: ${credential}`);
  const claude = await page.textContent('#snippet-claude');
  assert(claude.startsWith('claude mcp add --transport http') && claude.includes(credential), `the Claude Code command: ${claude}`);
  assert((await page.textContent('#snippet-mcp-json')).includes('"mcpServers"'), 'the .mcp.json block');
  assert((await page.textContent('#snippet-codex')).includes('[mcp_servers.'), 'the Codex block');
  assert((await page.textContent('#snippet-work-claude')).startsWith('switchboard work '), 'the runner line for Claude Code');
  await page.screenshot({ path: `${SHOTS}/vend-reveal-light.png`, fullPage: true });
  await page.goto(BASE + '/board/vend');
  assert(!(await page.content()).includes(credential), 'the vend page does not show the credential again');
  await page.goto(BASE + '/board/sign-in');
  await page.screenshot({ path: `${SHOTS}/sign-in-light.png` });
  assert(page.problems.length === 0, `no console errors: ${page.problems.join('; ')}`);
  check('pages');

  // --- the overview's counts add up to its cards --------------------------
  await page.goto(BASE + '/');
  const tally = await page.evaluate(() => {
    const n = (sel) => Number(document.querySelector(sel)?.textContent ?? 'NaN');
    const cards = [...document.querySelectorAll('article.endpoint')];
    const sum = (kind) => cards.reduce((acc, c) => acc + Number(c.querySelector(`[data-count="${kind}"]`).textContent.split(' ')[0]), 0);
    return {
      cards: cards.length,
      endpoints: n('#total-endpoints'),
      conditions: ['working', 'idle', 'off', 'attention', 'revoked'].map((k) => document.querySelector(`[data-total="${k}"]`) ? n(`[data-total="${k}"]`) : 0).reduce((a, b) => a + b, 0),
      pending: [n('#total-pending'), sum('pending')],
      retrying: [n('#total-retrying'), sum('retrying')],
      delayed: [n('#total-delayed'), sum('delayed')],
      claimed: [n('#total-claimed'), sum('claimed')],
      dead: [n('#total-dead'), sum('dead')],
    };
  });
  assert(tally.cards === tally.endpoints && tally.cards >= 5, `the endpoint count is the number of cards: ${JSON.stringify(tally)}`);
  assert(tally.conditions === tally.endpoints, `working + idle + off + attention + revoked = endpoints: ${JSON.stringify(tally)}`);
  for (const kind of ['pending', 'delayed', 'retrying', 'claimed', 'dead']) {
    assert(tally[kind][0] === tally[kind][1], `the ${kind} total is the sum of the cards: ${JSON.stringify(tally)}`);
  }
  check('counts-add-up');

  // --- pending work nobody hears is never a green idle --------------------
  const unheard = page.locator(`article[data-slug="${SLUG_UNHEARD}"] .chip`);
  assert(await unheard.getAttribute('data-condition') === 'unheard', `the endpoint with pending work and no session: ${await unheard.textContent()}`);
  assert(/^unheard \(\d+ pending\)$/.test((await unheard.textContent()).trim()), `the chip says why: ${await unheard.textContent()}`);
  const chipColors = await page.evaluate((slug) => {
    const el = document.querySelector(`article[data-slug="${slug}"] .chip`);
    return [getComputedStyle(el).backgroundColor, getComputedStyle(el).color];
  }, SLUG_UNHEARD);
  const idleColors = await page.evaluate(() => {
    const probe = document.createElement('span');
    probe.className = 'chip chip-idle';
    document.body.append(probe);
    const c = [getComputedStyle(probe).backgroundColor, getComputedStyle(probe).color];
    probe.remove();
    return c;
  });
  assert(chipColors[0] !== idleColors[0], `unheard is not painted as idle: ${chipColors} vs ${idleColors}`);
  assert(await page.locator(`article[data-slug="${SLUG_UNHEARD}"] .oldest time`).count() === 1, 'the card shows the oldest pending todo\'s age');
  check('unheard');

  // --- table rows stay on one line; long cells end in an ellipsis ---------
  const longTitle = `A very long title that would wrap a table row onto two lines ${'and more words '.repeat(4)}`;
  const long = await api('POST', `/api/v1/endpoints/${SLUG_A}/todos`, TOKEN_A, { title: longTitle });
  assert(long.status === 201, `push answered ${long.status}`);
  for (const width of [1280, 390]) {
    await page.setViewportSize({ width, height: 860 });
    await page.goto(BASE + '/board/todos');
    const rows = await page.evaluate(() => {
      const td = document.querySelector('#todo-table tbody td:nth-child(2)');
      const line = parseFloat(getComputedStyle(td).lineHeight);
      return [...document.querySelectorAll('#todo-table tbody tr')].map((tr) => ({ h: tr.getBoundingClientRect().height, line }));
    });
    assert(rows.length >= 2, `rows: ${rows.length}`);
    for (const r of rows) assert(r.h < 2 * r.line, `a row is one line at ${width} px: ${JSON.stringify(r)}`);
    // One synchronous read: a live refresh may swap the table between two calls.
    const clip = await page.evaluate((id) => {
      const a = document.querySelector(`#todo-table tr[data-id="${id}"] td.title .clip`);
      return { scroll: a.scrollWidth, client: a.clientWidth, overflow: getComputedStyle(a).textOverflow };
    }, long.json.id);
    assert(clip.scroll > clip.client && clip.overflow === 'ellipsis', `the long title is clipped with an ellipsis at ${width} px: ${JSON.stringify(clip)}`);
  }
  await page.setViewportSize({ width: 1280, height: 860 });
  await api('DELETE', `/api/v1/todos/${long.json.id}`, TOKEN_A);
  check('no-wrap');

  // --- at 390 px nothing runs off-screen ----------------------------------
  await page.setViewportSize({ width: 390, height: 844 });
  for (const path of ['/', `/board/endpoints/${SLUG_A}`, '/board/todos', '/board/queues', `/board/todos/${TODO_A}`, '/board/agents', '/board/tokens', '/board/vend']) {
    await page.goto(BASE + path);
    const fit = await page.evaluate(() => ({
      page: document.documentElement.scrollWidth,
      view: window.innerWidth,
      header: document.querySelector('header.top').getBoundingClientRect().right,
      wide: [...document.querySelectorAll('table')].filter((t) => !t.closest('.scroll')).length,
      // What sticks out, when something does (outside the scrolling boxes).
      out: [...document.querySelectorAll('body *')]
        .filter((el) => !el.closest('.scroll') && el.getBoundingClientRect().right > window.innerWidth + 0.5)
        .slice(0, 5)
        .map((el) => `${el.tagName.toLowerCase()}.${el.className}#${el.id} ${Math.round(el.getBoundingClientRect().right)}`),
    }));
    assert(fit.page <= fit.view && fit.header <= fit.view, `${path} fits 390 px: ${JSON.stringify(fit)}`);
    assert(fit.wide === 0, `${path}: every table scrolls inside its box`);
    if (path === '/board/todos') {
      await page.screenshot({ path: `${SHOTS}/todos-390-light.png`, fullPage: true });
    }
  }
  await page.setViewportSize({ width: 1280, height: 860 });
  check('phone-width');

  // --- absolute times carry their zone ------------------------------------
  await page.goto(BASE + `/board/todos/${TODO_A}`);
  const created = await page.locator('dd:has(time) .abs').first().textContent();
  assert(/^\(\d{4}-\d\d-\d\d \d\d:\d\d [A-Z]{3,5}\)$/.test(created), `the created time is absolute with a zone: ${created}`);
  // Every time on these pages carries its absolute form with a zone, in its
  // tooltip or beside it.
  for (const path of ['/', `/board/endpoints/${SLUG_A}`, '/board/todos', `/board/todos/${TODO_A}`, '/board/tokens']) {
    await page.goto(BASE + path);
    const times = await page.locator('time').evaluateAll((ts) => ts.map((t) => ({
      text: t.textContent,
      abs: t.title || (t.nextElementSibling?.classList.contains('abs') ? t.nextElementSibling.textContent : ''),
    })));
    assert(times.length > 0, `${path} shows times`);
    const bare = times.filter((t) => !/\d\d:\d\d [A-Z]{3,5}/.test(t.abs));
    assert(bare.length === 0, `${path}: every time has its absolute form with a zone: ${JSON.stringify(bare)}`);
  }
  check('times-zoned');

  // --- a second click on Vend vends nothing again ------------------------
  await page.goto(BASE + '/board/vend');
  await page.fill('#vend-agent', 'double-click');
  await page.dblclick('#vend-submit');
  // Whichever POST's answer the browser keeps: the reveal, or "already submitted".
  await page.waitForSelector('#reveal, #vend-already');
  await page.waitForLoadState('load');
  const replay = await page.evaluate(async () => {
    const form = document.querySelector('#vend-form');
    const body = new URLSearchParams(new FormData(form));
    body.set('agent', 'replayed');
    const first = await (await fetch('/board/vend', { method: 'POST', body })).text();
    const second = await (await fetch('/board/vend', { method: 'POST', body })).text();
    return { first: first.includes('id="snippet-token"'), second: second.includes('already submitted') && !second.includes('sbk_') };
  });
  assert(replay.first && replay.second, `the same form twice: one reveal, then "already submitted": ${JSON.stringify(replay)}`);
  const vended = await api('GET', '/api/v1/endpoints', TOKEN_A);
  for (const agent of ['double-click', 'replayed']) {
    const n = vended.json.endpoints.filter((e) => e.agent === agent).length;
    assert(n === 1, `one endpoint for ${agent}, not ${n}`);
  }
  check('vend-once');

  // --- push a todo from the endpoint page, then delete it -----------------
  await page.goto(BASE + `/board/endpoints/${SLUG_A}`);
  const pushedTitle = `pushed from the board ${Date.now()}`;
  await page.fill('#push-title', pushedTitle);
  await page.fill('#push-payload', '{"from": "the board"}');
  await Promise.all([page.waitForLoadState('load'), page.click('#push-submit')]);
  await page.waitForSelector('.flash.notice');
  const pushedNotice = await page.textContent('.flash.notice');
  const pushedId = (pushedNotice.match(/td_[0-9a-z]+/) || [])[0];
  assert(pushedId, `the notice names the todo: ${pushedNotice}`);
  const pushedTodo = await api('GET', `/api/v1/todos/${pushedId}`, TOKEN_A);
  assert(pushedTodo.json.title === pushedTitle && pushedTodo.json.payload.from === 'the board', `the API has it: ${JSON.stringify(pushedTodo.json)}`);
  await page.goto(BASE + `/board/todos/${pushedId}`);
  await page.check('#todo-delete-confirm');
  await Promise.all([page.waitForURL(/\/board\/todos\?notice=deleted/), page.click('#todo-delete')]);
  const afterDelete = await api('GET', `/api/v1/todos/${pushedId}`, TOKEN_A);
  assert(afterDelete.status === 404, `deleted: ${afterDelete.status}`);
  check('push-delete');

  // --- the shift editor previews as you type, and rejects inline ---------
  await page.goto(BASE + `/board/endpoints/${SLUG_A}`);
  await page.evaluate(() => { window.__marker = 'kept'; });
  const shift = page.locator('#shift');
  await shift.fill('');
  await shift.pressSequentially('TZ=Europe/Berlin Mon-Fri 09:00-17:00', { delay: 5 });
  await page.waitForSelector('#shift-preview [data-valid="true"] .boundaries li');
  const items = await page.locator('#shift-preview .boundaries li').count();
  assert(items === 4, `the preview lists the next 4 boundaries (got ${items})`);
  const canonical = await page.textContent('#shift-preview code');
  assert(canonical.includes('TZ=Europe/Berlin Mon-Fri 09:00-17:00'), `canonical form shown: ${canonical}`);
  await shift.fill('');
  await shift.pressSequentially('Mon-Fri 25:00-17:00', { delay: 5 });
  await page.waitForSelector('#shift-preview [data-valid="false"]');
  const error = await page.textContent('#shift-preview .field-error');
  assert(error.startsWith('shift'), `the error names the field: ${error}`);
  assert(await page.evaluate(() => window.__marker) === 'kept', 'the preview did not reload the page');
  check('shift-preview');

  // --- the presence toggle, and the API agrees ----------------------------
  await page.selectOption('#for', '1h');
  await Promise.all([page.waitForLoadState('load'), page.click('#presence-out')]);
  await page.waitForSelector('#presence-now[data-presence="out"]');
  const presence = await api('GET', `/api/v1/endpoints/${SLUG_A}/presence`, TOKEN_A);
  assert(presence.json.presence === 'out' && presence.json.source === 'operator', `the API says out by the operator: ${JSON.stringify(presence.json)}`);
  assert(await page.locator('text=/held until/').count() > 0, 'pending todos are labelled held until …');
  const until = await page.textContent('#presence-now');
  assert(/until \d\d:\d\d [A-Z]{3,5}/.test(until), `"until" carries its zone: ${until}`);
  assert(await page.locator('text=/held until \\d\\d:\\d\\d [A-Z]{3,5}/').count() > 0, 'held until carries its zone');
  await Promise.all([page.waitForLoadState('load'), page.click('#presence-in')]);
  await page.waitForSelector('#presence-now[data-presence="in"]');
  const back = await api('GET', `/api/v1/endpoints/${SLUG_A}/presence`, TOKEN_A);
  assert(back.json.presence === 'in', `the API says in again: ${JSON.stringify(back.json)}`);
  check('presence-toggle');

  // --- a todo pushed through the API appears without reload ---------------
  await page.goto(BASE + '/board/todos');
  await page.waitForLoadState('networkidle').catch(() => {});
  await page.evaluate(() => { window.__marker = 'kept'; });
  await page.check(`#sel-${TODO_A}`);
  const title = `live ${Date.now()}`;
  const pushed = await api('POST', `/api/v1/endpoints/${SLUG_A}/todos`, TOKEN_A, { title });
  assert(pushed.status === 201, `push answered ${pushed.status}`);
  await page.waitForSelector(`#todo-table >> text=${title}`, { timeout: 15_000 });
  assert(await page.evaluate(() => window.__marker) === 'kept', 'the todo arrived without a reload');
  assert(await page.isChecked(`#sel-${TODO_A}`), 'a ticked row stays ticked across a live refresh');
  await page.uncheck(`#sel-${TODO_A}`);
  check('live-todo');

  // --- bulk cancel of everything matching a filter ------------------------
  if (process.env.BULK === '1') {
    await page.goto(BASE + `/board/todos?endpoint=${SLUG_A}&state=pending`);
    const matching = Number(await page.textContent('#count-pending'));
    await Promise.all([page.waitForLoadState('load'), page.click('#bulk-cancel-filter')]);
    await page.waitForSelector('#bulk-confirm');
    const count = Number(await page.textContent('#bulk-confirm-count'));
    assert(count === matching && count >= 2, `the confirmation shows the count it will touch: ${count} (pending ${matching})`);
    assert((await page.textContent('#bulk-confirm-submit')).trim() === `Cancel ${count} todos`, 'the button says the count');
    const still = await api('GET', `/api/v1/todos?endpoint=${SLUG_A}&state=pending`, TOKEN_A);
    assert(still.json.todos.length === count, 'asking changed nothing');
    await Promise.all([page.waitForLoadState('load'), page.click('#bulk-confirm-submit')]);
    await page.waitForSelector('.flash.notice');
    const notice = await page.textContent('.flash.notice');
    assert(notice.includes(`cancelled ${count} todo`), `the count is shown: ${notice}`);
    const left = await api('GET', `/api/v1/todos?endpoint=${SLUG_A}&state=pending`, TOKEN_A);
    assert(left.json.todos.length === 0, `no pending todo is left: ${JSON.stringify(left.json)}`);
    const cancelled = await api('GET', `/api/v1/todos?endpoint=${SLUG_A}&state=cancelled`, TOKEN_A);
    assert(cancelled.json.todos.length >= 2, `the API lists them cancelled: ${JSON.stringify(cancelled.json)}`);
    check('bulk-cancel');
  }

  // --- a POST without the CSRF token is refused ---------------------------
  await page.goto(BASE + `/board/endpoints/${SLUG_A}`);
  const refused = await page.evaluate(async (slug) => {
    const res = await fetch(`/board/endpoints/${slug}/presence`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: 'presence=out',
    });
    return res.status;
  }, SLUG_A);
  assert(refused === 403, `a form without the CSRF token is 403 (got ${refused})`);
  assert(page.problems.every((p) => p.includes('status of 403')), `only the expected 403: ${page.problems}`);
  page.problems.length = 0;
  const still = await api('GET', `/api/v1/endpoints/${SLUG_A}/presence`, TOKEN_A);
  assert(still.json.presence === 'in', 'the refused form changed nothing');
  check('csrf');

  // --- keyboard: the first Tab reaches the skip link, which leads to main ---
  await page.goto(BASE + '/board/todos');
  await page.keyboard.press('Tab');
  assert(await page.evaluate(() => document.activeElement.classList.contains('skip')), 'the first Tab stop is the skip link');
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  assert(outline !== 'none', `focus is visible (outline ${outline})`);
  await page.keyboard.press('Enter');
  await page.waitForURL(/#main$/, { timeout: 5_000 });
  check('keyboard');

  // --- without JavaScript every page reads and every form posts -----------
  const nojs = await browser.newContext({ javaScriptEnabled: false });
  const plain = await nojs.newPage();
  plain.setDefaultTimeout(10_000);
  await plain.goto(BASE + '/board/sign-in');
  await plain.fill('#token', TOKEN_A);
  await Promise.all([plain.waitForURL(BASE + '/'), plain.click('button[type=submit]')]);
  assert(await plain.locator(`article[data-slug="${SLUG_A}"]`).count() === 1, 'the overview reads without JavaScript');
  for (const path of [`/board/endpoints/${SLUG_A}`, '/board/todos', `/board/todos/${TODO_A}`, '/board/agents', '/board/tokens', '/board/vend']) {
    const res = await plain.goto(BASE + path);
    assert(res.status() === 200, `${path} without JavaScript: ${res.status()}`);
  }
  await plain.goto(BASE + `/board/endpoints/${SLUG_A}`);
  await plain.fill('#shift', 'Mon-Fri 08:00-18:00');
  await plain.click('button:has-text("Save shift")');
  await plain.waitForURL(/notice=|error=/).catch(async () => {
    throw new Error(`no redirect after the shift form: at ${plain.url()}: ${(await plain.content()).slice(0, 3000)}`);
  });
  assert(plain.url().includes('notice=shift+saved'), `the shift form posts without JavaScript: ${plain.url()}`);
  const saved = await api('GET', `/api/v1/endpoints/${SLUG_A}/presence`, TOKEN_A);
  assert(saved.json.shift === 'Mon-Fri 08:00-18:00', `the API has the shift: ${JSON.stringify(saved.json)}`);
  await plain.fill('#shift', '');
  await Promise.all([plain.waitForURL(/shift\+cleared|error=/), plain.click('button:has-text("Save shift")')]);
  await plain.goto(BASE + '/board/agents');
  await plain.fill('input[name=name]', 'plain-html');
  await Promise.all([plain.waitForURL(/notice=|error=/), plain.click('button:has-text("Register")')]);
  assert(plain.url().includes('notice=agent+plain-html'), `the agent form posts without JavaScript: ${plain.url()}`);
  await Promise.all([plain.waitForURL(BASE + '/board/sign-in'), plain.click('.who button')]);
  await nojs.close();
  check('no-javascript');

  // --- a second human sees nothing of the first's -------------------------
  const b = await open('B');
  await signIn(b.page, TOKEN_B);
  assert(await b.page.locator('article.endpoint').count() === 0, 'B sees no endpoint card');
  const html = await b.page.content();
  assert(!html.includes(SLUG_A), "B's overview does not mention A's endpoint");
  for (const path of [`/board/endpoints/${SLUG_A}`, `/board/todos/${TODO_A}`]) {
    const res = await b.page.goto(BASE + path);
    assert(res.status() === 404, `${path} is 404 for B (got ${res.status()})`);
  }
  assert(b.page.problems.every((p) => p.includes('status of 404')), `only the expected 404s: ${b.page.problems}`);
  b.page.problems.length = 0;
  await b.page.goto(BASE + '/board/todos');
  assert(await b.page.locator('#todo-table').count() === 0, "B's todo table is empty");
  assert(!(await b.page.content()).includes(TODO_A), "B's todos do not mention A's todo");
  check('isolation');

  // --- revoking B's board token elsewhere sends B's open page to sign-in ---
  await b.page.goto(BASE + '/');
  await b.page.waitForLoadState('networkidle').catch(() => {});
  const bTokens = await api('GET', '/api/v1/tokens', TOKEN_B);
  for (const t of bTokens.json.tokens.filter((t) => t.label === 'board sign-in' && !t.revoked_at)) {
    await api('DELETE', `/api/v1/tokens/${t.id}`, TOKEN_B);
  }
  await b.page.waitForURL(BASE + '/board/sign-in', { timeout: 15_000 });
  // The ended stream (htmx's SSE extension logs its error event) and the
  // 401 that carried the redirect are what this check expects.
  b.page.problems = b.page.problems.filter((p) => !p.includes('status of 401') && !p.endsWith('[object Event]'));
  check('revoked-elsewhere');

  // --- sign-out revokes the board's token ---------------------------------
  await page.goto(BASE + '/');
  await Promise.all([page.waitForURL(BASE + '/board/sign-in'), page.click('.who button')]);
  await page.goto(BASE + '/');
  assert(page.url().endsWith('/board/sign-in'), 'signed out: / redirects to sign-in');
  check('sign-out');

  const problems = [...page.problems, ...b.page.problems];
  assert(problems.length === 0, `no console errors: ${problems.join('; ')}`);
  console.log(JSON.stringify({ ok: true, checks: done }));
} finally {
  await browser.close();
}
