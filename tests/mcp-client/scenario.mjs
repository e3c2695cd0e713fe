// One end-to-end scenario against a running switchboard, through the official
// MCP TypeScript SDK client. Driven by tests/mcp_interop.rs:
//
//     node scenario.mjs <mcp_url> <authorization header value> <scenario>
//
// (the URL and the header value are taken from the vended .mcp.json block.)
// Prints one JSON object on stdout for the Rust test to assert on; checks
// the protocol-level expectations itself and exits non-zero with a message
// on stderr when one fails. Every scenario is bounded by a deadline
// (SB_DEADLINE_MS overrides the default).
//
// The `listen` scenario is interactive instead (driven by tests/mcp_support/
// listener.rs for mcp_doorbells.rs and mcp_presence.rs): see `listen` below.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ToolListChangedNotificationSchema } from "@modelcontextprotocol/sdk/types.js";
import { createInterface } from "node:readline";
import { z } from "zod";

const DEADLINE_MS = Number(process.env.SB_DEADLINE_MS ?? 45_000);
const WAIT_MS = 15_000;

const [url, authorization, scenario] = process.argv.slice(2);
if (!url || !authorization || !scenario) {
  console.error("usage: node scenario.mjs <mcp_url> <authorization> <scenario>");
  process.exit(64);
}

class Failure extends Error {}

function check(condition, message, detail) {
  if (!condition) {
    throw new Failure(detail === undefined ? message : `${message}: ${JSON.stringify(detail)}`);
  }
}

function waitFor(promise, what, ms = WAIT_MS) {
  let timer;
  const timeout = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Failure(`timed out after ${ms} ms waiting for ${what}`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function deferred() {
  let resolve;
  const promise = new Promise((r) => {
    resolve = r;
  });
  return { promise, resolve };
}

/**
 * A client connected with the bearer header. Its fetch is wrapped to watch
 * the GET notification streams the SDK opens: when each is answered, how many
 * SSE keep-alive comments it carried, and when it ended.
 */
async function connect(options = {}) {
  const streams = [];
  const streamWaiters = [];
  const notifyStreams = () => {
    for (const w of streamWaiters) {
      if (streams.filter((s) => s.status === 200).length >= w.count) w.resolve();
    }
  };
  const watchingFetch = async (input, init) => {
    const response = await fetch(input, init);
    if ((init?.method ?? "GET") !== "GET") return response;
    const stream = {
      status: response.status,
      contentType: response.headers.get("content-type"),
      keepalives: 0,
      ended: false,
      ended_signal: deferred(),
    };
    streams.push(stream);
    if (!response.ok || !response.body) {
      notifyStreams();
      return response;
    }
    const [forSdk, forUs] = response.body.tee();
    (async () => {
      const decoder = new TextDecoder();
      let buffered = "";
      try {
        for await (const chunk of forUs) {
          buffered += decoder.decode(chunk, { stream: true });
          let newline;
          while ((newline = buffered.indexOf("\n")) >= 0) {
            const line = buffered.slice(0, newline);
            buffered = buffered.slice(newline + 1);
            if (line.startsWith(":")) stream.keepalives += 1;
          }
        }
      } catch {
        // Aborted by the client's close(): counts as ended too.
      }
      stream.ended = true;
      stream.ended_signal.resolve();
    })();
    notifyStreams();
    return new Response(forSdk, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
  };
  const transport = new StreamableHTTPClientTransport(new URL(url), {
    requestInit: { headers: { Authorization: authorization } },
    fetch: watchingFetch,
    reconnectionOptions: options.reconnectionOptions,
  });
  const errors = [];
  transport.onerror = (e) => errors.push(String(e));
  const client = new Client({ name: "switchboard-interop-test", version: "1.0.0" });
  if (options.before) options.before(client);
  await waitFor(client.connect(transport), "initialize");
  return {
    client,
    transport,
    streams,
    errors,
    /** Resolves once `count` GET streams have been answered with 200. */
    streamOpen(count = 1) {
      const waiter = deferred();
      streamWaiters.push({ count, resolve: waiter.resolve });
      notifyStreams();
      return waitFor(waiter.promise, `GET notification stream #${count}`);
    },
  };
}

/**
 * What a claim's text holds: a summary of structuredContent without the
 * payload (sent once): the row's main keys, payload_size, a note, and the
 * claim's counters.
 */
function claimText(structured, note) {
  if (structured.empty === true) return structured;
  const row = structured.todo ?? structured;
  const brief = {};
  for (const key of ["id", "queue", "title", "state", "attempt", "max_attempts", "lease_expires_at"]) {
    brief[key] = row[key] ?? null;
  }
  const truncated = row.payload_truncated === true;
  brief.payload_size = truncated
    ? row.payload_size
    : row.payload === null || row.payload === undefined
      ? 0
      : Buffer.byteLength(JSON.stringify(row.payload));
  if (truncated) brief.payload_truncated = true;
  brief.note = note;
  const extras = {
    attempt_seq: structured.attempt_seq,
    attempts_total: structured.attempts_total,
    prior_attempts_count: structured.prior_attempts?.length ?? 0,
  };
  if (structured.lease_token !== undefined) extras.lease_token = structured.lease_token;
  return "todo" in structured ? { empty: false, todo: brief, ...extras } : { ...brief, ...extras };
}

/** Same JSON, whatever the key order. */
function sameJson(a, b) {
  const sort = (v) =>
    Array.isArray(v)
      ? v.map(sort)
      : v && typeof v === "object"
        ? Object.fromEntries(Object.keys(v).sort().map((k) => [k, sort(v[k])]))
        : v;
  return JSON.stringify(sort(a)) === JSON.stringify(sort(b));
}

/**
 * Asserts the result is a success; returns its structured content. The text
 * is the same JSON as structuredContent, except for a claim (claim,
 * claim_next): a summary of it without the payload.
 */
function ok(result, what) {
  check(!result.isError, `${what} failed`, result);
  check(result.structuredContent !== undefined, `${what}: no structuredContent`, result);
  const text = result.content?.[0]?.text;
  check(typeof text === "string", `${what}: no text content`, result);
  const parsed = JSON.parse(text);
  const isClaim = result.toolName === "claim" || result.toolName === "claim_next";
  const row = parsed.todo ?? parsed;
  // `complete` with `next`: the short row, and the next claim's summary.
  const next = result.toolName === "complete" ? result.structuredContent.next : undefined;
  const expected = isClaim
    ? claimText(result.structuredContent, row.note)
    : next !== undefined
      ? { ...result.structuredContent, next: claimText(next, (parsed.next?.todo ?? parsed.next)?.note) }
      : result.structuredContent;
  if (isClaim && result.structuredContent.empty !== true) {
    check(typeof row.note === "string", `${what}: the claim's text has no note`, result);
    check(!("payload" in row), `${what}: the text repeats the payload`, result);
  }
  check(
    sameJson(parsed, expected),
    isClaim
      ? `${what}: the text is not the claim's summary`
      : `${what}: the text is not the same JSON as structuredContent`,
    result,
  );
  return result.structuredContent;
}

/** Asserts the result is a tool error; returns {code, message}. */
function toolError(result, what) {
  check(result.isError === true, `${what} should have been a tool error`, result);
  const error = result.structuredContent?.error;
  check(error && typeof error.code === "string", `${what}: no structuredContent.error`, result);
  check(
    result.content?.[0]?.text === `${error.code}: ${error.message}`,
    `${what}: text is not "<code>: <message>"`,
    result,
  );
  return error;
}

async function call(client, name, args = {}) {
  const result = await waitFor(client.callTool({ name, arguments: args }), `tools/call ${name}`);
  // So that ok() knows a claim's result (whose text is a summary).
  Object.defineProperty(result, "toolName", { value: name, enumerable: false });
  return result;
}

/** tools/list first, so the SDK validates every later structuredContent against its outputSchema. */
async function listTools(client) {
  const { tools } = await waitFor(client.listTools(), "tools/list");
  return tools;
}

/** Raw POST of one JSON-RPC request on an existing session. */
async function rawPost(sessionId, body) {
  const response = await fetch(url, {
    method: "POST",
    headers: {
      Authorization: authorization,
      "Content-Type": "application/json",
      Accept: "application/json, text/event-stream",
      "Mcp-Session-Id": sessionId,
    },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: await response.text() };
}

/** A doorbell (or digest), as Claude Code's channel handler would see it. */
const ChannelNotification = z.object({
  method: z.literal("notifications/claude/channel"),
  params: z.object({ content: z.string(), meta: z.record(z.string(), z.string()) }).passthrough(),
});

/** One JSON object per stdout line (the Rust side reads them as they come). */
function emit(line) {
  process.stdout.write(`${JSON.stringify(line)}\n`);
}

const scenarios = {
  /**
   * Interactive: connects SB_CLIENTS (default 1) SDK clients to the endpoint,
   * each with a handler for notifications/claude/channel, waits until every
   * client's GET stream is answered, then prints
   *
   *     {"type":"ready","sessions":["<Mcp-Session-Id>", …]}
   *
   * and from then on one line per channel event as it arrives:
   *
   *     {"type":"channel","client":<index>,"session":"…","params":{content, meta}}
   *
   * It reads commands from stdin, one JSON object a line, and answers each
   * with {"type":"reply","id":<id>, "result"|"error": …}:
   *
   *     {"id":1,"op":"call","client":0,"tool":"clock_out","args":{}}  (a CallToolResult)
   *     {"id":2,"op":"tools","client":0}                             (tools/list's tools)
   *     {"id":3,"op":"close"}                                        (closes the clients, exits)
   *
   * Waiting for events (and bounding the waits) is the Rust side's job; this
   * process ends on "close", when stdin closes, or at the deadline.
   */
  async listen() {
    const count = Number(process.env.SB_CLIENTS ?? 1);
    const conns = [];
    for (let index = 0; index < count; index += 1) {
      const conn = await connect({
        before(client) {
          client.setNotificationHandler(ChannelNotification, (n) => {
            const session = client.transport?.sessionId;
            emit({ type: "channel", client: index, session, params: n.params });
          });
        },
      });
      conns.push(conn);
      await listTools(conn.client);
      await conn.streamOpen(1);
    }
    emit({ type: "ready", sessions: conns.map((c) => c.transport.sessionId) });

    const lines = createInterface({ input: process.stdin, crlfDelay: Infinity });
    for await (const line of lines) {
      if (!line.trim()) continue;
      const command = JSON.parse(line);
      const reply = { type: "reply", id: command.id };
      try {
        const conn = conns[command.client ?? 0];
        if (command.op === "call") {
          reply.result = await call(conn.client, command.tool, command.args ?? {});
        } else if (command.op === "tools") {
          reply.result = await listTools(conn.client);
        } else if (command.op === "close") {
          break;
        } else {
          throw new Failure(`unknown op ${command.op}`);
        }
      } catch (e) {
        reply.error = String(e?.message ?? e);
      }
      emit(reply);
    }
    for (const conn of conns) await conn.client.close();
    return { type: "closed" };
  },

  async initialize() {
    const { client, transport } = await connect();
    const out = {
      server_version: client.getServerVersion(),
      capabilities: client.getServerCapabilities(),
      instructions: client.getInstructions(),
      protocol_version: transport.protocolVersion,
      session_id: transport.sessionId,
    };
    check(typeof out.session_id === "string" && out.session_id.length > 0, "no Mcp-Session-Id", out);
    await client.close();
    return out;
  },

  async list_tools() {
    const { client } = await connect();
    const tools = await listTools(client);
    for (const t of tools) {
      check(t.inputSchema?.type === "object", `${t.name}: inputSchema is not an object schema`, t);
      check(t.outputSchema?.type === "object", `${t.name}: no object outputSchema`, t);
      check(typeof t.description === "string" && t.description.length > 0, `${t.name}: no description`);
      check(typeof t.title === "string" && t.title.length > 0, `${t.name}: no title`, t);
      const a = t.annotations;
      check(a && typeof a === "object", `${t.name}: no annotations`, t);
      for (const hint of ["readOnlyHint", "idempotentHint", "destructiveHint", "openWorldHint"]) {
        check(typeof a[hint] === "boolean", `${t.name}: annotations.${hint} is not a boolean`, t);
      }
    }
    const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
    for (const name of ["list_todos", "get_todo", "queue_summary", "get_default_lease", "presence"]) {
      check(byName[name].annotations.readOnlyHint === true, `${name} should be read-only`, byName[name]);
      check(byName[name].annotations.destructiveHint === false, `${name} destroys nothing`, byName[name]);
    }
    for (const name of ["claim", "claim_next", "heartbeat", "complete", "complete_many", "fail", "release", "set_default_lease"]) {
      check(byName[name].annotations.readOnlyHint === false, `${name} is not read-only`, byName[name]);
    }
    check(byName.heartbeat.annotations.idempotentHint === true, "heartbeat is idempotent", byName.heartbeat);
    // Codex asks approval before a destructive tool and `codex exec` never
    // approves: recording an outcome on a held todo must not be one.
    for (const name of ["complete", "complete_many", "fail", "release"]) {
      check(byName[name].annotations.destructiveHint === false, `${name} is not destructive`, byName[name]);
    }
    check(
      tools.every((t) => t.annotations.openWorldHint === false),
      "no tool reaches an open world",
      tools.map((t) => t.annotations),
    );
    await client.close();
    return {
      tools: tools.map((t) => ({
        name: t.name,
        title: t.title,
        description: t.description,
        input: t.inputSchema,
        annotations: t.annotations,
      })),
    };
  },

  async claim_heartbeat_complete() {
    const { client } = await connect();
    await listTools(client);
    const claimed = ok(await call(client, "claim_next", { claimant: "interop" }), "claim_next");
    check(claimed.empty === false && claimed.todo?.state === "claimed", "claim_next claimed nothing", claimed);
    const id = claimed.todo.id;
    const heartbeat = ok(
      await call(client, "heartbeat", { id, note: "halfway there", lease_ttl_seconds: 120 }),
      "heartbeat",
    );
    check(heartbeat.state === "claimed", "heartbeat lost the claim", heartbeat);
    const completed = ok(
      await call(client, "complete", { id, result: { answer: 42 }, summary: "done by the SDK" }),
      "complete",
    );
    check(completed.state === "done", "complete did not finish the todo", completed);
    const detail = ok(await call(client, "get_todo", { id }), "get_todo");
    await client.close();
    return { claimed, heartbeat, completed, detail };
  },

  // The agent's loop with one call per todo: `complete` with `next` claims
  // the next one; the SDK checks each result against the output schema.
  async complete_with_next() {
    const { client } = await connect();
    await listTools(client);
    let claimed = ok(await call(client, "claim_next"), "claim_next");
    const drained = [];
    const answers = [];
    while (claimed.empty === false) {
      const id = claimed.todo.id;
      drained.push(id);
      const completed = ok(
        await call(client, "complete", { id, result: { n: drained.length }, next: {} }),
        "complete with next",
      );
      check(completed.state === "done" && completed.id === id, "complete with next did not finish", completed);
      answers.push(completed);
      claimed = completed.next;
    }
    await client.close();
    return { drained, answers };
  },

  async fail_retry() {
    const { client } = await connect();
    await listTools(client);
    const claimed = ok(await call(client, "claim_next"), "claim_next");
    check(claimed.empty === false, "nothing to claim", claimed);
    const id = claimed.todo.id;
    const failed = ok(await call(client, "fail", { id, summary: "flaky upstream" }), "fail");
    const during_window = ok(await call(client, "claim_next"), "claim_next during the retry window");
    const claim_by_id = toolError(await call(client, "claim", { id }), "claim during the retry window");
    const detail = ok(await call(client, "get_todo", { id }), "get_todo");
    await client.close();
    return { claimed, failed, during_window, claim_by_id, detail };
  },

  /** Triaged noise drained: a summary, two claims, one complete_many (one id not held), a summary again. */
  async drain() {
    const { client } = await connect();
    await listTools(client);
    const before = ok(await call(client, "queue_summary"), "queue_summary");
    const ids = [];
    for (let i = 0; i < 2; i++) {
      const claimed = ok(await call(client, "claim_next"), "claim_next");
      check(claimed.empty === false, "nothing to claim", claimed);
      ids.push(claimed.todo.id);
    }
    const drained = ok(
      await call(client, "complete_many", { ids: [...ids, "td_not_held"], summary: "noise" }),
      "complete_many",
    );
    const refused = toolError(await call(client, "complete_many", { ids: [] }), "complete_many with no ids");
    const outside = toolError(await call(client, "queue_summary", { queue: "elsewhere" }), "queue_summary outside scope");
    const after = ok(await call(client, "queue_summary", { queue: "inbox" }), "queue_summary of inbox");
    await client.close();
    return { before, drained, refused, outside, after };
  },

  async release() {
    const { client } = await connect();
    await listTools(client);
    const claimed = ok(await call(client, "claim_next"), "claim_next");
    check(claimed.empty === false, "nothing to claim", claimed);
    const id = claimed.todo.id;
    const released = ok(await call(client, "release", { id, summary: "not mine after all" }), "release");
    const reclaimed = ok(await call(client, "claim", { id, lease_ttl_seconds: 90 }), "claim by id");
    const completed = ok(await call(client, "complete", { id }), "complete");
    await client.close();
    return { claimed, released, reclaimed, completed };
  },

  async fenced() {
    const { client } = await connect();
    await listTools(client);
    const first = ok(await call(client, "claim_next", { require_fence: true }), "fenced claim_next");
    check(typeof first.lease_token === "string", "a fenced claim returns a lease_token", first);
    const id = first.todo.id;
    ok(await call(client, "release", { id, lease_token: first.lease_token }), "release with the token");
    const second = ok(await call(client, "claim", { id, require_fence: true }), "fenced claim");
    check(
      typeof second.lease_token === "string" && second.lease_token !== first.lease_token,
      "a new claim gets a new lease_token",
      second,
    );
    const stale = toolError(
      await call(client, "complete", { id, lease_token: first.lease_token }),
      "complete with a stale token",
    );
    const wrong = toolError(
      await call(client, "heartbeat", { id, lease_token: "not-the-token" }),
      "heartbeat with a wrong token",
    );
    const missing = toolError(await call(client, "complete", { id }), "complete without the token");
    const completed = ok(
      await call(client, "complete", { id, lease_token: second.lease_token }),
      "complete with the right token",
    );
    await client.close();
    return { first, second, stale, wrong, missing, completed };
  },

  /**
   * Two todos pushed by the test: one with a payload under the inline limit,
   * then one over it. The SDK validates both claim results against the
   * output schema; the large payload is left out and get_todo returns it.
   */
  async large_payload() {
    const { client } = await connect();
    await listTools(client);
    const small = ok(await call(client, "claim_next"), "claim_next (small payload)");
    check(small.todo.payload !== null && small.todo.payload_truncated === undefined, "small payload inline", small);
    ok(await call(client, "complete", { id: small.todo.id }), "complete");
    const large = ok(await call(client, "claim_next"), "claim_next (large payload)");
    check(large.todo.payload === null && large.todo.payload_truncated === true, "large payload left out", large);
    check(typeof large.todo.payload_preview === "string", "a preview", large);
    const whole = ok(await call(client, "get_todo", { id: large.todo.id }), "get_todo");
    await client.close();
    return {
      small_size: Buffer.byteLength(JSON.stringify(small.todo.payload)),
      large: {
        payload_size: large.todo.payload_size,
        preview_bytes: Buffer.byteLength(large.todo.payload_preview),
        payload_truncated: large.todo.payload_truncated,
      },
      whole_size: Buffer.byteLength(JSON.stringify(whole.payload)),
    };
  },

  async empty() {
    const { client } = await connect();
    await listTools(client);
    const next = ok(await call(client, "claim_next"), "claim_next");
    const listed = ok(await call(client, "list_todos"), "list_todos");
    await client.close();
    return { next, listed };
  },

  async list_changed() {
    const changed = [];
    const first = deferred();
    const conn = await connect({
      before(client) {
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => {
          changed.push(n.method);
          first.resolve();
        });
      },
    });
    const { client } = conn;
    await listTools(client);
    await conn.streamOpen(1);
    const before = ok(await call(client, "get_default_lease"), "get_default_lease");
    const set = ok(await call(client, "set_default_lease", { default_lease_ttl_seconds: 900 }), "set_default_lease");
    await waitFor(first.promise, "notifications/tools/list_changed");
    const tools = await listTools(client);
    const claim = tools.find((t) => t.name === "claim");
    const after = ok(await call(client, "get_default_lease"), "get_default_lease");
    await client.close();
    return {
      before,
      set,
      after,
      notifications: changed,
      claim_description: claim?.description,
      stream_content_type: conn.streams[0].contentType,
    };
  },

  async channel() {
    // Doorbells through a custom notification handler, the way Claude Code
    // hears a channel. The todo is pushed (REST API, SB_API_URL and
    // SB_API_TOKEN) only once the GET stream is open and has shown it stays
    // open (two keep-alive comments: the server runs with a short period).
    const apiUrl = process.env.SB_API_URL;
    const apiToken = process.env.SB_API_TOKEN;
    check(apiUrl && apiToken, "SB_API_URL and SB_API_TOKEN are required");
    const channel = [];
    const rang = deferred();
    const ChannelNotification = z.object({
      method: z.literal("notifications/claude/channel"),
      params: z.object({ content: z.string(), meta: z.record(z.string(), z.string()) }).passthrough(),
    });
    const conn = await connect({
      before(client) {
        client.setNotificationHandler(ChannelNotification, (n) => {
          channel.push(n.params);
          if (n.params.meta.todo_id) rang.resolve();
        });
      },
    });
    const { client } = conn;
    await listTools(client);
    await conn.streamOpen(1);
    const stream = conn.streams[0];
    const started = Date.now();
    while (stream.keepalives < 2 && !stream.ended && Date.now() - started < WAIT_MS) {
      await new Promise((r) => setTimeout(r, 50));
    }
    check(stream.keepalives >= 2, "no keep-alive comments on the GET stream", stream);
    check(!stream.ended, "the GET stream ended", stream);

    const slug = new URL(url).pathname.split("/").pop();
    // What the operator sees while this client's stream is open.
    const view = await fetch(`${apiUrl}/api/v1/endpoints/${slug}`, {
      headers: { Authorization: `Bearer ${apiToken}` },
    });
    check(view.status === 200, "GET the endpoint", view.status);
    const sessions_while_streaming = (await view.json()).sessions;
    const pushed = await fetch(`${apiUrl}/api/v1/endpoints/${slug}/todos`, {
      method: "POST",
      headers: { Authorization: `Bearer ${apiToken}`, "Content-Type": "application/json" },
      body: JSON.stringify({ title: "ring the bell", payload: { via: "doorbell" } }),
    });
    check(pushed.status === 201, "push a todo", pushed.status);
    const todoId = (await pushed.json()).id;
    await waitFor(rang.promise, "a notifications/claude/channel doorbell");
    const bell = channel.find((p) => p.meta.todo_id);
    // Act on the doorbell: claim the todo it names, then complete it.
    const claimed = ok(await call(client, "claim", { id: bell.meta.todo_id }), "claim from the doorbell");
    const completed = ok(await call(client, "complete", { id: bell.meta.todo_id }), "complete");
    const out = {
      pushed: todoId,
      sessions_while_streaming,
      streams_opened: conn.streams.length,
      stream_status: stream.status,
      stream_content_type: stream.contentType,
      keepalives: stream.keepalives,
      still_open: !stream.ended,
      channel_events: channel,
      claimed,
      completed,
    };
    await client.close();
    return out;
  },

  async reconnect_stream() {
    const changed = [];
    const got = deferred();
    const conn = await connect({
      reconnectionOptions: {
        initialReconnectionDelay: 50,
        maxReconnectionDelay: 1000,
        reconnectionDelayGrowFactor: 1.5,
        maxRetries: 5,
      },
      before(client) {
        client.setNotificationHandler(ToolListChangedNotificationSchema, (n) => {
          changed.push(n.method);
          got.resolve();
        });
      },
    });
    const { client, transport } = conn;
    await conn.streamOpen(1);
    // A second GET on the session (ours, raw) replaces the SDK's stream,
    // which ends; the SDK reconnects, and its new stream replaces ours.
    const raw = await fetch(url, {
      method: "GET",
      headers: {
        Authorization: authorization,
        Accept: "text/event-stream",
        "Mcp-Session-Id": transport.sessionId,
      },
    });
    check(raw.status === 200, "a second GET stream opens", raw.status);
    await waitFor(conn.streams[0].ended_signal.promise, "the replaced SDK stream to end");
    await conn.streamOpen(2);
    const rawEnded = (async () => {
      const reader = raw.body.getReader();
      while (!(await reader.read()).done) {
        // Keep-alives until the SDK's reconnect replaces this stream.
      }
    })();
    await waitFor(rawEnded, "the raw stream to be replaced by the SDK's reconnect");
    ok(await call(client, "set_default_lease", { default_lease_ttl_seconds: 600 }), "set_default_lease");
    await waitFor(got.promise, "notifications/tools/list_changed over the reconnected stream");
    const out = {
      sdk_streams: conn.streams.map((s) => ({ status: s.status, ended: s.ended })),
      notifications: changed,
    };
    await client.close();
    return out;
  },

  async session_end() {
    const one = await connect();
    const sessionId = one.transport.sessionId;
    ok(await call(one.client, "get_default_lease"), "get_default_lease");
    await waitFor(one.transport.terminateSession(), "DELETE");
    await one.client.close();
    const after_delete = await rawPost(sessionId, { jsonrpc: "2.0", id: 1, method: "tools/list" });
    const two = await connect();
    check(two.transport.sessionId !== sessionId, "a new connection gets a new session");
    const lease = ok(await call(two.client, "get_default_lease"), "get_default_lease after reconnecting");
    await two.client.close();
    return { after_delete, lease };
  },

  async presence_verbs() {
    const { client } = await connect();
    await listTools(client);
    const before = ok(await call(client, "presence"), "presence");
    const out = ok(await call(client, "clock_out"), "clock_out");
    const again = ok(await call(client, "clock_out"), "clock_out again (idempotent)");
    const back = ok(await call(client, "clock_in", { for: "30m" }), "clock_in");
    const bad = toolError(await call(client, "clock_in", { for: "9h" }), "clock_in for 9h");
    const after = ok(await call(client, "presence"), "presence");
    await client.close();
    return { before, out, again, back, bad, after };
  },

  async protocol_errors() {
    const { client } = await connect();
    await listTools(client);
    let unknown_tool;
    try {
      await client.callTool({ name: "no_such_tool", arguments: {} });
      unknown_tool = { thrown: false };
    } catch (e) {
      unknown_tool = { thrown: true, code: e.code, message: e.message };
    }
    const unknown_argument = toolError(
      await call(client, "claim_next", { endpoint: "someone-else" }),
      "claim_next with an unknown argument",
    );
    const out_of_range = toolError(
      await call(client, "set_default_lease", { default_lease_ttl_seconds: 5 }),
      "set_default_lease below the minimum",
    );
    const ping = await waitFor(client.ping(), "ping");
    await client.close();
    return { unknown_tool, unknown_argument, out_of_range, ping };
  },
};

const run = scenarios[scenario];
if (!run) {
  console.error(`unknown scenario ${scenario}; known: ${Object.keys(scenarios).join(", ")}`);
  process.exit(64);
}
const deadline = setTimeout(() => {
  console.error(`scenario ${scenario} did not finish within ${DEADLINE_MS} ms`);
  process.exit(3);
}, DEADLINE_MS);
try {
  const out = await run();
  clearTimeout(deadline);
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
} catch (e) {
  console.error(e instanceof Failure ? `FAILED: ${e.message}` : `ERROR: ${e?.stack ?? e}`);
  process.exit(1);
}
