// A scripted stand-in model on loopback, for tests/it/clients.rs: the real
// Claude Code and Codex CLI clients talk to it instead of a hosted model, and
// it drives one whole queue loop through the MCP server named on its command
// line: claim_next, then complete with the claimed todo's id, then "done".
// A claim_next that finds the queue empty (a run the runner starts when
// nothing is left for it) is answered with "done" too.
//
//   node stand-in-model.mjs SERVER_NAME LOG_FILE
//
// Prints `listening http://127.0.0.1:PORT` once it accepts connections, then
// nothing. Every request it receives is appended to LOG_FILE as one JSON
// line ({seq, method, url, body}), and every answer as one more
// ({seq, answer}, the same seq), so a failing test can show what the client
// asked for and what it was told. Nothing here reaches beyond 127.0.0.1.
//
// Both APIs are stateless: each request carries the whole conversation, so
// the next step is read from it.
//
// - Claude Code, Anthropic Messages API (`ANTHROPIC_BASE_URL`):
//   POST /v1/messages (streamed as SSE when `stream` is true) and
//   POST /v1/messages/count_tokens. Its MCP tools may be deferred behind its
//   ToolSearch tool; the stand-in then loads them first. Side requests (a
//   title, a topic check: no queue tool offered) get a short harmless text.
// - Codex CLI, OpenAI Responses API (a `model_providers` entry with
//   `wire_api = "responses"`): POST /v1/responses, streamed as
//   `response.*` SSE events with `function_call` items.
//
// The result the stand-in completes with is RESULT (below); the tests look
// for it through the REST API.

import { createServer } from "node:http";
import { appendFileSync } from "node:fs";

const [serverName, logFile] = process.argv.slice(2);
if (!serverName || !logFile) {
  console.error("usage: node stand-in-model.mjs SERVER_NAME LOG_FILE");
  process.exit(2);
}

const RESULT = { worked_by: "stand-in-model", outcome: "ok" };
const SUMMARY = "Done by the stand-in model";
const TODO_ID = /td_[0-9a-f]{32}/;
const EMPTY = /"empty"\s*:\s*true/;

// The step after claim_next answered `output`: complete the claimed todo,
// "done" when the queue was empty, else what it said, for the test to show.
function afterClaim(output, complete) {
  const id = output.match(TODO_ID);
  if (id) return complete(id[0]);
  if (EMPTY.test(output)) return { text: "done" };
  return { text: `claim_next returned no todo: ${output.slice(0, 200)}` };
}

// The last turn: "done" when complete answered with the todo done, else
// what it said (a refusal, an approval prompt, an error) for the test to show.
function finished(output) {
  if (/"state"\s*:\s*"done"/.test(output)) return { text: "done" };
  return { text: `complete did not finish the todo: ${output.slice(0, 500)}` };
}

function log(entry) {
  appendFileSync(logFile, JSON.stringify(entry) + "\n");
}

let seq = 0;
let requests = 0;
const nextId = (prefix) => `${prefix}_${Date.now().toString(36)}${(seq++).toString(36)}`;

// ---------------------------------------------------------------------------
// Claude Code: the Anthropic Messages API.

// Claude Code's name for one of the server's tools.
const claudeTool = (verb) => `mcp__${serverName}__${verb}`;

// Text of a tool_result's content (a string or text blocks).
function resultText(content) {
  if (typeof content === "string") return content;
  if (Array.isArray(content)) {
    return content.map((b) => (b && b.type === "text" ? b.text : JSON.stringify(b))).join("\n");
  }
  return JSON.stringify(content ?? "");
}

// The next step of the scripted loop for a Messages request: a tool_use
// ({name, input}) or a text.
function claudeStep(body) {
  const tools = (body.tools || []).map((t) => t.name);
  const offered = (verb) => tools.includes(claudeTool(verb));
  const canSearch = tools.includes("ToolSearch");
  if (!offered("claim_next") && !canSearch) {
    return { text: "Switchboard queue" }; // a side request: title, topic, summary
  }
  // The names of the tool_use blocks so far, by id.
  const uses = new Map();
  for (const m of body.messages || []) {
    if (m.role === "assistant" && Array.isArray(m.content)) {
      for (const b of m.content) if (b.type === "tool_use") uses.set(b.id, b.name);
    }
  }
  const last = (body.messages || []).at(-1);
  const results =
    last && last.role === "user" && Array.isArray(last.content)
      ? last.content.filter((b) => b.type === "tool_result")
      : [];
  const lastResult = results.at(-1);
  const lastTool = lastResult ? uses.get(lastResult.tool_use_id) : undefined;
  const claim = { tool: claudeTool("claim_next"), input: {} };
  if (!lastResult) {
    if (offered("claim_next")) return claim;
    return {
      tool: "ToolSearch",
      input: { query: `select:${claudeTool("claim_next")},${claudeTool("complete")}`, max_results: 5 },
    };
  }
  if (lastTool === "ToolSearch") return claim;
  if (lastTool === claudeTool("claim_next")) {
    return afterClaim(resultText(lastResult.content), (id) => ({
      tool: claudeTool("complete"),
      input: { id, result: RESULT, summary: SUMMARY },
    }));
  }
  if (lastTool === claudeTool("complete")) return finished(resultText(lastResult.content));
  return { text: `unexpected tool result from ${lastTool}` };
}

function claudeMessage(body, step) {
  const content = step.tool
    ? [{ type: "tool_use", id: nextId("toolu"), name: step.tool, input: step.input }]
    : [{ type: "text", text: step.text }];
  return {
    id: nextId("msg"),
    type: "message",
    role: "assistant",
    model: body.model || "stand-in",
    content,
    stop_reason: step.tool ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: 10, output_tokens: 5, cache_creation_input_tokens: 0, cache_read_input_tokens: 0 },
  };
}

function sse(res, events) {
  res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
  for (const [event, data] of events) {
    res.write(`event: ${event}\ndata: ${JSON.stringify(data)}\n\n`);
  }
  res.end();
}

function answerClaude(res, body, n) {
  const step = claudeStep(body);
  const message = claudeMessage(body, step);
  log({ seq: n, answer: step });
  if (!body.stream) {
    res.writeHead(200, { "content-type": "application/json" });
    res.end(JSON.stringify(message));
    return;
  }
  const block = message.content[0];
  const events = [
    ["message_start", { type: "message_start", message: { ...message, content: [], stop_reason: null, usage: { ...message.usage, output_tokens: 0 } } }],
  ];
  if (block.type === "tool_use") {
    events.push(
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { ...block, input: {} } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "input_json_delta", partial_json: JSON.stringify(block.input) } }],
    );
  } else {
    events.push(
      ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
      ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: block.text } }],
    );
  }
  events.push(
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: message.stop_reason, stop_sequence: null }, usage: { output_tokens: 5 } }],
    ["message_stop", { type: "message_stop" }],
  );
  sse(res, events);
}

// ---------------------------------------------------------------------------
// Codex CLI: the OpenAI Responses API.

// The function the request offers for one of the server's tools. Codex
// 0.169 offers an MCP server's tools as one `namespace` tool
// (`mcp__<server>`, the name's `-` turned into `_`) whose functions are
// the bare tool names; a call names the function and its namespace.
function codexTool(body, verb) {
  const namespace = `mcp__${serverName.replace(/[^A-Za-z0-9_]/g, "_")}`;
  for (const t of body.tools || []) {
    if (t.type === "namespace" && t.name === namespace) {
      if ((t.tools || []).some((f) => f.name === verb)) return { name: verb, namespace };
    }
  }
  return undefined;
}

function codexStep(body) {
  const input = Array.isArray(body.input) ? body.input : [];
  const calls = new Map();
  for (const item of input) {
    if (item.type === "function_call") calls.set(item.call_id, item.name);
  }
  const outputs = input.filter((i) => i.type === "function_call_output");
  const lastItem = input.at(-1);
  const lastOutput = lastItem && lastItem.type === "function_call_output" ? lastItem : undefined;
  const claimNext = codexTool(body, "claim_next");
  const complete = codexTool(body, "complete");
  if (!claimNext) return { text: "Switchboard queue" };
  if (!lastOutput) {
    if (outputs.length > 0) return { text: "done" };
    return { tool: claimNext, args: {} };
  }
  const output = typeof lastOutput.output === "string" ? lastOutput.output : JSON.stringify(lastOutput.output);
  const lastTool = calls.get(lastOutput.call_id);
  if (lastTool === "claim_next") {
    return afterClaim(output, (id) =>
      complete ? { tool: complete, args: { id, result: RESULT, summary: SUMMARY } } : { text: "complete is not offered" },
    );
  }
  if (lastTool === "complete") return finished(output);
  return { text: `unexpected tool output from ${lastTool}` };
}

function answerCodex(res, body, n) {
  const step = codexStep(body);
  log({ seq: n, answer: step });
  const responseId = nextId("resp");
  const item = step.tool
    ? { type: "function_call", id: nextId("fc"), call_id: nextId("call"), name: step.tool.name, namespace: step.tool.namespace, arguments: JSON.stringify(step.args), status: "completed" }
    : { type: "message", id: nextId("msg"), role: "assistant", status: "completed", content: [{ type: "output_text", text: step.text, annotations: [] }] };
  const response = { id: responseId, object: "response", created_at: Math.floor(Date.now() / 1000), model: body.model || "stand-in", status: "in_progress", output: [] };
  const usage = { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 };
  const events = [
    ["response.created", { type: "response.created", response }],
    ["response.output_item.added", { type: "response.output_item.added", output_index: 0, item: step.tool ? { ...item, arguments: "", status: "in_progress" } : { ...item, content: [], status: "in_progress" } }],
  ];
  if (!step.tool) {
    events.push(["response.output_text.delta", { type: "response.output_text.delta", item_id: item.id, output_index: 0, content_index: 0, delta: step.text }]);
  }
  events.push(
    ["response.output_item.done", { type: "response.output_item.done", output_index: 0, item }],
    ["response.completed", { type: "response.completed", response: { ...response, status: "completed", output: [item], usage } }],
  );
  sse(res, events);
}

// ---------------------------------------------------------------------------

const server = createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const raw = Buffer.concat(chunks).toString("utf8");
    let body = {};
    try {
      body = raw ? JSON.parse(raw) : {};
    } catch {
      body = { unparsed: raw.slice(0, 2000) };
    }
    const n = ++requests;
    log({ seq: n, method: req.method, url: req.url, body });
    const path = (req.url || "").split("?")[0];
    try {
      if (req.method === "POST" && path.endsWith("/messages/count_tokens")) {
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify({ input_tokens: 10 }));
      } else if (req.method === "POST" && path.endsWith("/messages")) {
        answerClaude(res, body, n);
      } else if (req.method === "POST" && path.endsWith("/responses")) {
        answerCodex(res, body, n);
      } else {
        // Anything else (a model list, telemetry): an empty success.
        res.writeHead(200, { "content-type": "application/json" });
        res.end(JSON.stringify(path.endsWith("/models") ? { data: [], models: [] } : {}));
      }
    } catch (e) {
      log({ seq: n, error: String(e && e.stack) });
      res.writeHead(500, { "content-type": "application/json" });
      res.end(JSON.stringify({ type: "error", error: { type: "api_error", message: String(e) } }));
    }
  });
});

server.listen(0, "127.0.0.1", () => {
  console.log(`listening http://127.0.0.1:${server.address().port}`);
});
