// The MCP TypeScript SDK's OAuth client provider against a running
// switchboard (docs/oauth.md), driven by tests/it/oauth/sdk.rs:
//
//     node oauth.mjs <mcp_url> <board cookie value>
//
// The SDK does what a hosted client does: its first request is refused
// (401), it discovers the protected-resource and authorization-server
// metadata from that answer, registers itself (DCR) and sends the "user"
// to /oauth/authorize with PKCE. The "user" is this script with the
// board's session cookie: it reads the consent page and posts Allow, as a
// signed-in browser would. Then the SDK redeems the code, calls tools
// (claim_next, complete), and refreshes its tokens (rotation).
//
// Prints one JSON object on stdout for the Rust test; exits non-zero with
// a message on stderr when an expectation fails.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { UnauthorizedError, auth } from "@modelcontextprotocol/sdk/client/auth.js";

const DEADLINE_MS = Number(process.env.SB_DEADLINE_MS ?? 45_000);
const [url, cookie] = process.argv.slice(2);
if (!url || !cookie) {
  console.error("usage: node oauth.mjs <mcp_url> <board cookie>");
  process.exit(64);
}
const origin = new URL(url).origin;
const REDIRECT = "http://127.0.0.1:33418/callback";

class Failure extends Error {}
function check(condition, message, detail) {
  if (!condition) {
    throw new Failure(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
  }
}

/** What a client keeps between runs; here, in memory. */
class Provider {
  constructor() {
    this.saved = {};
    this.seen = { authorizationUrl: null, registered: null };
  }
  get redirectUrl() {
    return REDIRECT;
  }
  get clientMetadata() {
    return {
      client_name: "SDK end-to-end",
      redirect_uris: [REDIRECT],
      grant_types: ["authorization_code", "refresh_token"],
      response_types: ["code"],
      token_endpoint_auth_method: "none",
    };
  }
  state() {
    return "sdk-state-1";
  }
  clientInformation() {
    return this.saved.client;
  }
  saveClientInformation(info) {
    this.saved.client = info;
    this.seen.registered = info;
  }
  tokens() {
    return this.saved.tokens;
  }
  saveTokens(tokens) {
    this.saved.tokens = tokens;
  }
  saveCodeVerifier(verifier) {
    this.saved.verifier = verifier;
  }
  codeVerifier() {
    return this.saved.verifier;
  }
  async redirectToAuthorization(authorizationUrl) {
    this.seen.authorizationUrl = authorizationUrl.toString();
    this.code = await consent(authorizationUrl);
  }
}

/** HTML character references back to text. */
function unescape(text) {
  const named = { amp: "&", lt: "<", gt: ">", quot: '"', apos: "'" };
  return text.replace(/&(#x[0-9a-fA-F]+|#[0-9]+|[a-z]+);/g, (whole, ref) => {
    if (ref.startsWith("#x")) return String.fromCodePoint(parseInt(ref.slice(2), 16));
    if (ref.startsWith("#")) return String.fromCodePoint(parseInt(ref.slice(1), 10));
    return named[ref] ?? whole;
  });
}

/** The hidden fields of the consent form, and the first endpoint offered. */
function fields(html) {
  const out = {};
  for (const name of ["csrf", "client_id", "redirect_uri", "code_challenge", "state", "resource", "endpoint"]) {
    const m = html.match(new RegExp(`name="${name}" value="([^"]*)"`));
    check(m, `the consent page has no ${name} field`);
    out[name] = unescape(m[1]);
  }
  return out;
}

/** The signed-in human: reads the consent page and allows. Returns the code. */
async function consent(authorizationUrl) {
  const headers = { cookie: `sb_board=${cookie}` };
  const page = await fetch(authorizationUrl, { headers, redirect: "manual" });
  const html = await page.text();
  check(page.status === 200, "the consent page", { status: page.status, html: html.slice(0, 500) });
  check(html.includes("SDK end-to-end"), "the consent page names the client");
  const form = new URLSearchParams({ ...fields(html), decision: "allow" });
  const answer = await fetch(`${origin}/oauth/authorize`, {
    method: "POST",
    headers: { ...headers, "content-type": "application/x-www-form-urlencoded" },
    body: form.toString(),
    redirect: "manual",
  });
  check(answer.status === 303, "the consent answer redirects", { status: answer.status });
  const location = new URL(answer.headers.get("location"));
  check(location.origin + location.pathname === REDIRECT, "back to the redirect URI", location.toString());
  check(location.searchParams.get("state") === "sdk-state-1", "state comes back", location.toString());
  check(location.searchParams.get("iss") === origin, "iss names this server (RFC 9207)", location.toString());
  const code = location.searchParams.get("code");
  check(code, "a code", location.toString());
  return code;
}

function structured(result, what) {
  check(!result.isError, `${what} failed`, result);
  return result.structuredContent;
}

async function main() {
  const provider = new Provider();
  // 1. The first connect is refused; the SDK goes through discovery, DCR
  //    and the authorization request, and says it needs the code.
  const first = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const client = new Client({ name: "oauth-e2e", version: "1.0.0" });
  let refused = false;
  try {
    await client.connect(first);
  } catch (e) {
    refused = e instanceof UnauthorizedError;
    if (!refused) throw e;
  }
  check(refused, "the first connect needs authorization");
  check(provider.seen.registered?.client_id?.startsWith("oc_"), "registered by DCR", provider.seen.registered);
  const authorizationUrl = new URL(provider.seen.authorizationUrl);
  check(authorizationUrl.searchParams.get("code_challenge_method") === "S256", "PKCE S256", authorizationUrl.toString());
  check(authorizationUrl.searchParams.get("resource") === url, "resource is the MCP URL", authorizationUrl.toString());

  // 2. The code for tokens, then a session as the endpoint.
  await first.finishAuth(provider.code);
  const firstTokens = provider.tokens();
  check(firstTokens?.access_token?.startsWith("sbo_"), "an access token", Object.keys(firstTokens ?? {}));
  check(firstTokens.refresh_token?.startsWith("sbr_"), "a refresh token");
  const transport = new StreamableHTTPClientTransport(new URL(url), { authProvider: provider });
  const connected = new Client({ name: "oauth-e2e", version: "1.0.0" });
  await connected.connect(transport);
  const { tools } = await connected.listTools();
  const claimed = structured(await connected.callTool({ name: "claim_next", arguments: { claimant: "oauth" } }), "claim_next");
  check(claimed.empty === false, "claim_next claimed the pushed todo", claimed);
  const done = structured(
    await connected.callTool({ name: "complete", arguments: { id: claimed.todo.id, summary: "done over OAuth" } }),
    "complete",
  );
  check(done.state === "done", "complete finished it", done);
  await connected.close();

  // 3. Refresh: the SDK rotates the pair; the new access token works.
  const refreshed = await auth(provider, { serverUrl: url });
  check(refreshed === "AUTHORIZED", "refreshed without the user", refreshed);
  const second = provider.tokens();
  check(second.refresh_token !== firstTokens.refresh_token, "the refresh token rotated");
  check(second.access_token !== firstTokens.access_token, "a new access token");
  const again = new Client({ name: "oauth-e2e", version: "1.0.0" });
  await again.connect(new StreamableHTTPClientTransport(new URL(url), { authProvider: provider }));
  const summary = structured(await again.callTool({ name: "queue_summary", arguments: {} }), "queue_summary");
  await again.close();

  return {
    client_id: provider.seen.registered.client_id,
    tools: tools.map((t) => t.name),
    todo: claimed.todo.id,
    access_token: second.access_token,
    summary,
  };
}

const timer = setTimeout(() => {
  console.error(`oauth.mjs: no result within ${DEADLINE_MS} ms`);
  process.exit(2);
}, DEADLINE_MS);
main().then(
  (result) => {
    clearTimeout(timer);
    process.stdout.write(`${JSON.stringify(result)}\n`);
    process.exit(0);
  },
  (e) => {
    clearTimeout(timer);
    console.error(e instanceof Failure ? `oauth.mjs: ${e.message}` : e);
    process.exit(1);
  },
);
