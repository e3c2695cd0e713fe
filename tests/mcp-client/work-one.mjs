// One run of a headless worker under `switchboard work` (tests/it/runner.rs):
// the official MCP TypeScript SDK client, pointed at the endpoint by the
// environment the runner adds (SWITCHBOARD_MCP_URL, SWITCHBOARD_TOKEN).
// It claims with claim_next, completes what it claimed, and exits 0.
//
// Knobs (environment):
//   WORK_LOG       append one JSON line per run to this file: the runner's
//                  variables and the ids this run completed;
//   WORK_SLEEP_MS  after the first claim, wait this long before completing
//                  (so that doorbells arrive during the run);
//   WORK_DRAIN=1   claim again until nothing is left (as the vended prompt
//                  asks an agent to), else one todo at most;
//   WORK_SLOW_ONCE a file path: the run that creates it is the slow one
//                  (WORK_SLEEP_MS, one todo); every later run drains at once.
//
// It opens no GET notification stream (a fetch wrapper answers the SDK's GET
// with 405, which the SDK takes as "no stream"): a headless run needs none,
// and the doorbells of the endpoint go to the runner's own session.

import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { appendFileSync, writeFileSync } from "node:fs";

const url = process.env.SWITCHBOARD_MCP_URL;
const token = process.env.SWITCHBOARD_TOKEN;
if (!url || !token) {
  console.error("work-one: SWITCHBOARD_MCP_URL and SWITCHBOARD_TOKEN are required");
  process.exit(64);
}
let sleepMs = Number(process.env.WORK_SLEEP_MS ?? 0);
let drain = process.env.WORK_DRAIN === "1";
if (process.env.WORK_SLOW_ONCE) {
  let slow;
  try {
    writeFileSync(process.env.WORK_SLOW_ONCE, "slow run\n", { flag: "wx" });
    slow = true;
  } catch {
    slow = false;
  }
  drain = !slow;
  if (!slow) sleepMs = 0;
}

const noStream = async (input, init) => {
  if ((init?.method ?? "GET") === "GET") {
    return new Response(null, { status: 405, statusText: "Method Not Allowed" });
  }
  return fetch(input, init);
};

const transport = new StreamableHTTPClientTransport(new URL(url), {
  requestInit: { headers: { Authorization: `Bearer ${token}` } },
  fetch: noStream,
});
const client = new Client({ name: "work-one", version: "1.0.0" });
await client.connect(transport);

async function call(name, args = {}) {
  const result = await client.callTool({ name, arguments: args });
  if (result.isError) {
    throw new Error(`${name}: ${JSON.stringify(result.structuredContent ?? result.content)}`);
  }
  return result.structuredContent;
}

const completed = [];
let first = true;
for (;;) {
  const claimed = await call("claim_next");
  if (claimed.empty !== false) break;
  const id = claimed.todo.id;
  if (first && sleepMs > 0) await new Promise((r) => setTimeout(r, sleepMs));
  first = false;
  await call("complete", { id, summary: "done by work-one" });
  completed.push(id);
  if (!drain) break;
}

if (process.env.WORK_LOG) {
  appendFileSync(
    process.env.WORK_LOG,
    JSON.stringify({
      endpoint: process.env.SWITCHBOARD_ENDPOINT ?? null,
      todo_id: process.env.SWITCHBOARD_TODO_ID ?? null,
      doorbell: process.env.SWITCHBOARD_DOORBELL ?? null,
      completed,
    }) + "\n",
  );
}
try {
  await transport.terminateSession();
} catch {
  // The session ends with the process anyway.
}
await client.close();
