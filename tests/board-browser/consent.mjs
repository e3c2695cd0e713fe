// The OAuth consent flow in Debian's Chromium (playwright-core), as a
// hosted client's human meets it: a link on the client's own site (another
// site than the server's) opens /oauth/authorize. The board's session
// cookie is SameSite=Strict, so that cross-site navigation arrives without
// it; the server's own little page (oauth_continue.html) refreshes onward,
// and from there on the browser is same-site. Run by
// tests/it/board/consent_browser.rs against a real `switchboard serve`.
//
// This script is the client too: it registers itself (DCR) with a loopback
// redirect URI served by its own listener, which records what comes back,
// serves the "client's site" under http://localhost:PORT (a different
// host, hence a different site, than the server's 127.0.0.1), redeems the
// code with its PKCE verifier and calls the MCP URL with the access token.
//
// Environment: BOARD_URL, TOKEN (an sbh_ token), SLUG (an endpoint of its
// human), SHOTS, CHROMIUM. Prints a JSON summary as its last line.
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { createHash, randomBytes } from 'node:crypto';

const env = (name) => {
  const v = process.env[name];
  if (!v) throw new Error(`missing ${name}`);
  return v;
};
const BASE = env('BOARD_URL');
const TOKEN = env('TOKEN');
const SLUG = env('SLUG');
const MCP_URL = `${BASE}/mcp/${SLUG}`;
const CLIENT_NAME = 'Browser consent client';
/// The whole scenario; it takes a few seconds on a quiet machine.
const DEADLINE_MS = 120_000;

const done = [];
const check = (name) => { done.push(name); console.log(`ok ${name}`); };
const assert = (cond, what) => { if (!cond) throw new Error(`assertion failed: ${what}`); };
const b64url = (bytes) => bytes.toString('base64url');

// --- the client's listener: its site (/start) and its redirect URI -------
const callbacks = [];
let callbackWaiter = null;
const links = new Map();
const listener = createServer((req, res) => {
  const url = new URL(req.url, 'http://listener');
  if (url.pathname === '/callback') {
    callbacks.push(Object.fromEntries(url.searchParams));
    callbackWaiter?.();
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end('<!doctype html><link rel="icon" href="data:,"><title>Back at the client</title><h1 id="back">Back at the client</h1>');
    return;
  }
  const to = url.pathname === '/start' && links.get(url.searchParams.get('n'));
  if (to) {
    const href = to.replace(/&/g, '&amp;').replace(/"/g, '&quot;');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' });
    res.end(`<!doctype html><link rel="icon" href="data:,"><title>The client</title><a id="connect" href="${href}">Connect Switchboard</a>`);
    return;
  }
  res.writeHead(404).end();
});
await new Promise((ok) => listener.listen(0, '127.0.0.1', ok));
const PORT = listener.address().port;
const REDIRECT = `http://127.0.0.1:${PORT}/callback`;
/// The client's site: `localhost` is another site than `127.0.0.1`.
const CLIENT_SITE = `http://localhost:${PORT}`;

/// Resolves with the next query the redirect URI receives.
function nextCallback() {
  const seen = callbacks.length;
  return new Promise((ok, fail) => {
    const timer = setTimeout(() => fail(new Error('no callback within 10 s')), 10_000);
    callbackWaiter = () => {
      if (callbacks.length > seen) {
        clearTimeout(timer);
        callbackWaiter = null;
        ok(callbacks[seen]);
      }
    };
  });
}

async function post(path, body, type = 'json') {
  const res = await fetch(BASE + path, {
    method: 'POST',
    headers: { 'content-type': type === 'json' ? 'application/json' : 'application/x-www-form-urlencoded' },
    body: type === 'json' ? JSON.stringify(body) : new URLSearchParams(body).toString(),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null, headers: res.headers };
}

/// Redeems `code` with its verifier: the access token.
async function redeem(clientId, code, verifier) {
  const tokens = await post('/oauth/token', {
    grant_type: 'authorization_code',
    client_id: clientId,
    code,
    redirect_uri: REDIRECT,
    code_verifier: verifier,
  }, 'form');
  assert(tokens.status === 200, `the token answer is 200 (got ${tokens.status}: ${JSON.stringify(tokens.json)})`);
  assert(tokens.json.access_token?.startsWith('sbo_'), 'an access token');
  assert(tokens.json.refresh_token?.startsWith('sbr_'), 'a refresh token');
  return tokens.json.access_token;
}

/// An MCP `initialize` at `url` with `access`, which must succeed.
async function initialize(url, access) {
  const init = await fetch(url, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${access}`,
      'content-type': 'application/json',
      accept: 'application/json, text/event-stream',
    },
    body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: {
      protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'consent.mjs', version: '1' } } }),
    signal: AbortSignal.timeout(10_000),
  });
  assert(init.status === 200, `initialize answers 200 (got ${init.status})`);
  const text = await init.text();
  assert(text.includes('"serverInfo"'), `an initialize result: ${text.slice(0, 300)}`);
}

/// A fresh authorization request (its own PKCE pair and state), behind a
/// link on the client's site: the URL of that page, and the request.
function authorization(clientId, state, { resource = MCP_URL } = {}) {
  const verifier = b64url(randomBytes(32));
  const challenge = b64url(createHash('sha256').update(verifier).digest());
  const query = new URLSearchParams({
    response_type: 'code',
    client_id: clientId,
    redirect_uri: REDIRECT,
    code_challenge: challenge,
    code_challenge_method: 'S256',
    state,
    ...(resource ? { resource } : {}),
  });
  const n = String(links.size + 1);
  links.set(n, `${BASE}/oauth/authorize?${query}`);
  return { start: `${CLIENT_SITE}/start?n=${n}`, verifier, state };
}

/// The board's pages the browser went through (navigations, redirects
/// included): method, path, status, Sec-Fetch-Site and whether the board's
/// cookie went along.
function recordHops(page) {
  const hops = [];
  page.on('response', (response) => {
    const url = new URL(response.url());
    const request = response.request();
    if (url.origin !== BASE || !request.isNavigationRequest()) return;
    // In the order they come; the headers sent are filled in when read.
    const hop = { path: url.pathname, method: request.method(), status: response.status() };
    hop.ready = request.allHeaders().then((sent) => {
      hop.site = sent['sec-fetch-site'];
      hop.cookie = /(^|;\s*)sb_board=/.test(sent.cookie ?? '');
    });
    hops.push(hop);
  });
  return hops;
}

/// The hops so far, once their headers are read.
async function hopsSeen(hops) {
  await Promise.all(hops.map((h) => h.ready));
  return hops.map(({ ready, ...h }) => h);
}

/// Clicks the client's link and waits for the board's page `selector`.
async function fromClientSite(page, request, selector) {
  await page.goto(request.start);
  assert(new URL(page.url()).hostname === 'localhost', `on the client's site: ${page.url()}`);
  await Promise.all([page.waitForSelector(selector), page.click('#connect')]);
  assert(page.url().startsWith(BASE), `at the board: ${page.url()}`);
}

async function consentShows(page) {
  assert(await page.locator('#token').count() === 0, 'the consent page, not the sign-in form');
  assert((await page.textContent('h1')).includes(CLIENT_NAME), 'the page names the client');
  assert((await page.textContent('#oauth-redirect-host')).trim() === '127.0.0.1', 'and where it sends you back');
  assert((await page.textContent('#oauth-client')).includes('a program on this computer'), 'a loopback redirect says so');
  assert(await page.locator('#oauth-unverified').count() === 1, 'a self-registered name is marked unverified');
  assert(await page.locator(`input[name=endpoint][value="${SLUG}"]`).isChecked(), 'the endpoint resource names');
}

const watchdog = setTimeout(() => {
  console.error(`consent.mjs: no result within ${DEADLINE_MS} ms`);
  console.log(JSON.stringify({ ok: false, checks: done, error: 'deadline' }));
  process.exit(2);
}, DEADLINE_MS);

const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox', '--disable-dev-shm-usage'],
});
try {
  // --- the client registers itself --------------------------------------
  const registered = await post('/oauth/register', {
    client_name: CLIENT_NAME,
    redirect_uris: [REDIRECT],
    grant_types: ['authorization_code', 'refresh_token'],
    response_types: ['code'],
    token_endpoint_auth_method: 'none',
  });
  assert(registered.status === 201, `DCR answers 201 (got ${registered.status}: ${JSON.stringify(registered.json)})`);
  const clientId = registered.json.client_id;
  assert(clientId?.startsWith('oc_'), `a client id: ${clientId}`);
  check('dcr');

  const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await context.newPage();
  const problems = [];
  // Chromium logs the refused sign-in's 401 as an error; that one is meant.
  let refusalExpected = false;
  page.on('console', (m) => {
    if (m.type() !== 'error') return;
    if (refusalExpected && m.text().includes('status of 401')) return;
    problems.push(`console: ${m.text()}`);
  });
  page.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  page.setDefaultTimeout(10_000);
  const hops = recordHops(page);

  // --- not signed in: cross-site to the sign-in form, and back ----------
  const first = authorization(clientId, 'first-' + b64url(randomBytes(6)));
  await fromClientSite(page, first, '#token');
  assert(new URL(page.url()).pathname === '/board/sign-in', `the sign-in form: ${page.url()}`);
  assert(new URL(page.url()).searchParams.get('next')?.startsWith('/oauth/authorize?'), 'which comes back to the request');
  // A mistyped token: the form says so and still goes back to the request.
  await page.fill('#token', 'sbh_not-a-real-token');
  refusalExpected = true;
  await Promise.all([page.waitForSelector('#token-error'), page.click('button[type=submit]')]);
  refusalExpected = false;
  assert((await page.inputValue('input[name=next]')).startsWith('/oauth/authorize?'), 'the retry keeps where to go');
  await page.fill('#token', TOKEN);
  await Promise.all([page.waitForSelector('#consent-form'), page.click('button[type=submit]')]);
  assert(new URL(page.url()).pathname === '/oauth/authorize', `back at the request: ${page.url()}`);
  await consentShows(page);
  const signInHops = await hopsSeen(hops);
  const signInPath = signInHops.map((h) => `${h.method} ${h.path} ${h.status} ${h.site}`).join(' → ');
  assert(signInHops.length === 5, `five hops: ${signInPath}`);
  assert(signInHops[0].path === '/oauth/authorize' && signInHops[0].site === 'cross-site' && signInHops[0].status === 200,
    `the click arrives cross-site at the continue page: ${signInPath}`);
  assert(signInHops[1].path === '/board/sign-in' && signInHops[1].site === 'same-origin' && signInHops[1].status === 200,
    `which goes on same-origin to the form: ${signInPath}`);
  assert(signInHops[2].method === 'POST' && signInHops[2].status === 401, `a wrong token is refused: ${signInPath}`);
  assert(signInHops[3].method === 'POST' && signInHops[3].status === 303, `the right one redirects: ${signInPath}`);
  assert(signInHops[4].path === '/oauth/authorize' && signInHops[4].cookie, `back to the request, signed in: ${signInPath}`);
  check('cross-site-sign-in');

  const allowed = nextCallback();
  await Promise.all([page.waitForSelector('#back'), page.click('#consent-allow')]);
  const answer = await allowed;
  assert(answer.code, `a code: ${JSON.stringify(answer)}`);
  assert(answer.state === first.state, `the same state: ${JSON.stringify(answer)}`);
  assert(answer.iss === BASE, `iss names the server (RFC 9207): ${JSON.stringify(answer)}`);
  assert(!answer.error, `no error: ${JSON.stringify(answer)}`);
  check('allow');

  // --- the code from the browser works (a code lives 60 s: redeem now) ---
  const access = await redeem(clientId, answer.code, first.verifier);
  check('token');
  await initialize(MCP_URL, access);
  check('mcp');

  // --- signed in already: the cross-site click bounces once, then consent -
  hops.length = 0;
  const second = authorization(clientId, 'second-' + b64url(randomBytes(6)));
  await fromClientSite(page, second, '#consent-form');
  await consentShows(page);
  const bounceHops = await hopsSeen(hops);
  const path = bounceHops.map((h) => `${h.method} ${h.path} ${h.status} ${h.site}`).join(' → ');
  assert(bounceHops.length === 3, `three hops: ${path}`);
  const [arrive, bounce, consent] = bounceHops;
  // Cross-site, the browser withholds the SameSite=Strict cookie: the
  // server's own page goes on; its navigation is same-origin and carries it.
  assert(arrive.path === '/oauth/authorize' && arrive.status === 200, `the continue page first: ${path}`);
  assert(bounce.path === '/board/sign-in' && bounce.status === 303, `the sign-in form passes a session on: ${path}`);
  assert(consent.path === '/oauth/authorize' && consent.status === 200, `then the consent page: ${path}`);
  assert(arrive.site === 'cross-site' && !arrive.cookie, `the click is cross-site, without the cookie: ${JSON.stringify(arrive)}`);
  assert(bounce.site === 'same-origin' && bounce.cookie, `the refresh is same-origin, with it: ${JSON.stringify(bounce)}`);
  assert(consent.site === 'same-origin' && consent.cookie, `so is the consent page: ${JSON.stringify(consent)}`);
  check('signed-in-bounce');

  // --- Deny: the client hears access_denied, with its state --------------
  const denied = nextCallback();
  await Promise.all([page.waitForSelector('#back'), page.click('#consent-deny')]);
  const refusal = await denied;
  assert(refusal.error === 'access_denied', `access_denied: ${JSON.stringify(refusal)}`);
  assert(refusal.state === second.state, `the same state: ${JSON.stringify(refusal)}`);
  assert(refusal.iss === BASE, `iss: ${JSON.stringify(refusal)}`);
  assert(!refusal.code, `no code: ${JSON.stringify(refusal)}`);
  check('deny');

  // --- phone width: the consent page does not scroll sideways -----------
  await page.setViewportSize({ width: 390, height: 800 });
  const third = authorization(clientId, 'third');
  await fromClientSite(page, third, '#consent-form');
  const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(overflow <= 1, `no sideways scroll at 390 px (${overflow} px)`);
  for (const id of ['#consent-allow', '#consent-deny']) {
    const box = await page.locator(id).boundingBox();
    assert(box && box.x >= 0 && box.x + box.width <= 390, `${id} is on screen: ${JSON.stringify(box)}`);
  }
  check('phone-width');

  // --- no resource: the human picks a new endpoint (still 390 px wide) ---
  const fourth = authorization(clientId, 'fourth', { resource: null });
  await fromClientSite(page, fourth, '#consent-form');
  const wide = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
  assert(wide <= 1, `the choice page does not scroll sideways at 390 px (${wide} px)`);
  assert(await page.locator(`input[name=endpoint][value="${SLUG}"]`).isChecked(), 'the existing endpoint is offered first');
  await page.check('input[name=endpoint][value=new]');
  await page.fill('input[name=new_agent]', 'browser-chat');
  await page.fill('input[name=new_queues]', 'inbox, chat');
  await page.check('input[name=new_verbs][value=claim_next]');
  await page.check('input[name=new_verbs][value=complete]');
  const vended = nextCallback();
  await Promise.all([page.waitForSelector('#back'), page.click('#consent-allow')]);
  const fresh = await vended;
  assert(fresh.code && fresh.state === 'fourth', `a code for the new endpoint: ${JSON.stringify(fresh)}`);
  const newAccess = await redeem(clientId, fresh.code, fourth.verifier);
  const listed = await fetch(`${BASE}/api/v1/endpoints`, {
    headers: { authorization: `Bearer ${TOKEN}` }, signal: AbortSignal.timeout(10_000) });
  const endpoints = (await listed.json()).endpoints ?? [];
  const made = endpoints.find((e) => e.agent === 'browser-chat');
  assert(made, `the new endpoint is listed: ${JSON.stringify(endpoints).slice(0, 500)}`);
  assert(made.scope.queues.join() === 'inbox,chat', `with the queues typed: ${JSON.stringify(made.scope)}`);
  assert(made.scope.verbs.join() === 'claim_next,complete', `and the verbs checked: ${JSON.stringify(made.scope)}`);
  await initialize(made.mcp_url, newAccess);
  check('new-endpoint');

  // --- JavaScript off: the onward page is a meta refresh, not a script ---
  const plainContext = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 1280, height: 900 } });
  const plain = await plainContext.newPage();
  plain.setDefaultTimeout(10_000);
  const fifth = authorization(clientId, 'fifth');
  await fromClientSite(plain, fifth, '#token');
  await plain.fill('#token', TOKEN);
  await Promise.all([plain.waitForSelector('#consent-form'), plain.click('button[type=submit]')]);
  await consentShows(plain);
  const noScript = nextCallback();
  await Promise.all([plain.waitForSelector('#back'), plain.click('#consent-allow')]);
  const plainAnswer = await noScript;
  assert(plainAnswer.code && plainAnswer.state === 'fifth', `a code without JavaScript: ${JSON.stringify(plainAnswer)}`);
  await plainContext.close();
  check('no-javascript');

  assert(problems.length === 0, `no console errors: ${problems.join('; ')}`);
  console.log(JSON.stringify({ ok: true, checks: done, client_id: clientId }));
} catch (e) {
  console.error(e.stack || String(e));
  console.log(JSON.stringify({ ok: false, checks: done, error: String(e) }));
  process.exitCode = 1;
} finally {
  clearTimeout(watchdog);
  await browser.close();
  listener.closeAllConnections();
  listener.close();
}
