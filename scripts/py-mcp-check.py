#!/usr/bin/env python3
"""The official Python MCP SDK (2.x) against a real `switchboard serve`.

Starts the server on a temporary SQLite file (port 0: the kernel picks a
free one, read back from the log), vends an endpoint through the REST API
with the first-start admin token (chosen here, in SWITCHBOARD_BOOTSTRAP_TOKEN), connects with
the SDK's Streamable HTTP client in its default `mode="auto"` (which probes
`server/discover` under MCP-Protocol-Version 2026-07-28 first and falls back
to `initialize` on a JSON-RPC error), lists the tools and calls `presence`.

Usage: py-mcp-check.py <path to the switchboard binary>
Exit status 0 when every check holds, 1 otherwise (with the reason on stderr).
Run it through `scripts/py-mcp-check`, which makes the venv.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import mcp
from mcp.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

START_TIMEOUT = 30.0
CONNECT_TIMEOUT = 60.0


class CheckFailed(Exception):
    pass


def check(condition: bool, message: str) -> None:
    if not condition:
        raise CheckFailed(message)


def start_server(binary: str, workdir: str) -> tuple[subprocess.Popen[str], str, str, list[str]]:
    """`serve` on 127.0.0.1:0; returns the process, its address, the admin token and its log."""
    env = {k: v for k, v in os.environ.items() if k != "SWITCHBOARD_DATABASE_URL"}
    env["SWITCHBOARD_LOG"] = "info"
    # The first human's token, chosen here as an orchestrator would (stderr
    # is a pipe, so the server would otherwise write it to a file).
    chosen = "sbh_" + base64.urlsafe_b64encode(os.urandom(32)).decode().rstrip("=")
    env["SWITCHBOARD_BOOTSTRAP_TOKEN"] = chosen
    proc = subprocess.Popen(
        [binary, "serve", "--listen", "127.0.0.1:0", "--database", os.path.join(workdir, "sb.db")],
        cwd=workdir,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    log: list[str] = []
    found: queue.Queue[tuple[str, str | None]] = queue.Queue()

    def read() -> None:
        token = chosen
        assert proc.stderr is not None
        for line in proc.stderr:
            log.append(line.rstrip("\n"))
            if "switchboard is serving" in line and "listen=" in line:
                addr = line.split("listen=", 1)[1].split()[0]
                found.put((addr, token))

    threading.Thread(target=read, daemon=True).start()
    try:
        addr, token = found.get(timeout=START_TIMEOUT)
    except queue.Empty:
        proc.kill()
        raise CheckFailed("the server did not report its address; log:\n" + "\n".join(log)) from None
    check(token is not None, "no admin token")
    return proc, addr, token, log


def vend(addr: str, admin_token: str) -> tuple[str, str]:
    """POST /api/v1/endpoints; returns the MCP URL and the endpoint's token."""
    request = urllib.request.Request(
        f"http://{addr}/api/v1/endpoints",
        data=json.dumps({"agent": "py-sdk"}).encode(),
        headers={"Authorization": f"Bearer {admin_token}", "Content-Type": "application/json"},
        method="POST",
    )
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    with opener.open(request, timeout=10) as response:
        check(response.status == 201, f"vend answered {response.status}")
        view = json.load(response)
    return view["mcp_url"], view["token"]


async def connect_and_call(url: str, token: str) -> dict:
    seen: list[tuple[str, str | None, int]] = []

    async def on_response(response) -> None:  # noqa: ANN001 (httpx2 types)
        request = response.request
        method = None
        if request.method == "POST":
            try:
                method = json.loads(request.content or b"{}").get("method")
            except ValueError:
                method = "?"
        seen.append((request.method, method, response.status_code))

    http = create_mcp_http_client(headers={"Authorization": f"Bearer {token}"})
    http.event_hooks["response"] = [on_response]
    async with http:
        transport = streamable_http_client(url, http_client=http)
        async with Client(transport, client_info=mcp.types.Implementation(name="py-mcp-check", version="1")) as client:
            version = client.protocol_version
            tools = await client.list_tools()
            names = [t.name for t in tools.tools]
            presence = await client.call_tool("presence", {})
            listed = await client.call_tool("list_todos", {"limit": 5})
    return {
        "protocol_version": version,
        "tools": names,
        "annotations": {t.name: t.annotations.model_dump(by_alias=True, exclude_none=True) if t.annotations else None for t in tools.tools},
        "presence": presence.structured_content,
        "presence_is_error": presence.is_error,
        "list_todos": listed.structured_content,
        "requests": seen,
    }


def main() -> int:
    if len(sys.argv) != 2:
        print("usage: py-mcp-check.py <switchboard binary>", file=sys.stderr)
        return 1
    binary = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="py-mcp-check-") as workdir:
        proc = None
        log: list[str] = []
        try:
            proc, addr, admin_token, log = start_server(binary, workdir)
            url, token = vend(addr, admin_token)
            out = asyncio.run(asyncio.wait_for(connect_and_call(url, token), CONNECT_TIMEOUT))

            requests = out["requests"]
            posts = [r for r in requests if r[0] == "POST"]
            check(len(posts) >= 2, f"too few POSTs: {requests}")
            check(
                posts[0][1] == "server/discover" and posts[0][2] == 400,
                f"the SDK should open with server/discover, answered 400: {requests}",
            )
            check(posts[1][1] == "initialize" and posts[1][2] == 200, f"then initialize: {requests}")
            check(
                out["protocol_version"] in ("2025-11-25", "2025-06-18", "2025-03-26"),
                f"negotiated {out['protocol_version']!r}",
            )
            check("presence" in out["tools"] and "claim_next" in out["tools"], f"tools: {out['tools']}")
            check(
                out["annotations"].get("list_todos", {}).get("readOnlyHint") is True,
                f"list_todos is read-only: {out['annotations'].get('list_todos')}",
            )
            check(not out["presence_is_error"], f"presence failed: {out['presence']}")
            check(
                isinstance(out["presence"], dict) and out["presence"].get("presence") in ("in", "out"),
                f"presence: {out['presence']}",
            )
            check(out["list_todos"] == {"todos": []}, f"list_todos: {out['list_todos']}")
            print(
                f"ok: mcp {mcp_version()} connected through the server/discover fallback "
                f"(protocol {out['protocol_version']}), {len(out['tools'])} tools, "
                f"presence={out['presence']['presence']}"
            )
            return 0
        except CheckFailed as e:
            print(f"py-mcp-check FAILED: {e}", file=sys.stderr)
        except Exception as e:  # noqa: BLE001 (every failure is reported the same way)
            print(f"py-mcp-check FAILED: {type(e).__name__}: {e}", file=sys.stderr)
            if log:
                print("server log (tail):\n" + "\n".join(log[-20:]), file=sys.stderr)
        finally:
            if proc is not None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
        return 1


def mcp_version() -> str:
    from importlib.metadata import version

    return version("mcp")


if __name__ == "__main__":
    started = time.monotonic()
    status = main()
    print(f"({time.monotonic() - started:.1f} s)", file=sys.stderr)
    sys.exit(status)
