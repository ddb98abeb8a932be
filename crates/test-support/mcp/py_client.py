#!/usr/bin/env python3
"""A third-party MCP client (the official Python SDK, mcp 2.x) driving reef as an MCP server.

Usage:
    py_client.py http URL [--token TOKEN] [--origin ORIGIN] [--host HOST] [--agent NAME]
    py_client.py stdio [--agent NAME] -- COMMAND ARGS...

It lists reef's tools, spawns an agent, sends it a message with wait=true, lists the
resources and reads the agent's transcript, and prints one JSON object with what it saw.
A failure to connect prints {"error": ...} instead, with the HTTP status when there is one.
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp import types
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client


def text_of(result) -> str:
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def scenario(session: ClientSession, agent: str, changes: list) -> dict:
    await session.initialize()
    out: dict = {}
    tools = await session.list_tools()
    out["tools"] = sorted(t.name for t in tools.tools)
    spawned = await session.call_tool("spawn_agent", {"name": agent, "template": "worker"})
    out["spawn_error"] = spawned.is_error
    out["spawned"] = text_of(spawned)
    reply = await session.call_tool(
        "send_message", {"agent": agent, "text": "hello from mcp", "wait": True, "timeout_secs": 60}
    )
    out["reply_error"] = reply.is_error
    out["reply"] = text_of(reply)
    resources = await session.list_resources()
    out["resources"] = sorted(str(r.uri) for r in resources.resources)
    transcript = await session.read_resource(f"reef://agents/{agent}/transcript")
    out["transcript"] = "".join(getattr(c, "text", "") for c in transcript.contents)
    status = await session.call_tool("agent_status", {"agent": agent})
    out["status"] = text_of(status)
    missing = await session.call_tool("agent_status", {"agent": "nobody-here"})
    out["missing_error"] = missing.is_error
    out["missing"] = text_of(missing)
    # listChanged: the spawn was announced (give a late notification a moment).
    for _ in range(50):
        if changes:
            break
        await anyio.sleep(0.1)
    out["resource_changes"] = len(changes)
    return out


def recorder(changes: list):
    async def handle(message) -> None:
        root = getattr(message, "root", message)
        if isinstance(root, types.ResourceListChangedNotification):
            changes.append("resources")

    return handle


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["http", "stdio"])
    parser.add_argument("url", nargs="?")
    parser.add_argument("--token")
    parser.add_argument("--origin")
    parser.add_argument("--host", help="a Host header other than the URL's")
    parser.add_argument("--agent", default="ada")
    argv = sys.argv[1:]
    command = argv[argv.index("--") + 1 :] if "--" in argv else []
    args = parser.parse_args(argv[: len(argv) - len(command) - (1 if command else 0)])
    changes: list = []
    try:
        if args.mode == "http":
            headers = {}
            if args.token:
                headers["Authorization"] = f"Bearer {args.token}"
            if args.origin:
                headers["Origin"] = args.origin
            if args.host:
                headers["Host"] = args.host
            async with create_mcp_http_client(headers=headers) as http:
                # The SDK reports a refused connection without its HTTP status: ask once
                # plainly with the same client first, so the test sees 401 or 403 itself.
                probe = await http.post(
                    args.url,
                    json={"jsonrpc": "2.0", "id": 0, "method": "ping"},
                    headers={"Accept": "application/json, text/event-stream"},
                )
                if probe.status_code in (401, 403):
                    print(json.dumps({"error": probe.text, "status": probe.status_code}))
                    return
                async with streamable_http_client(args.url, http_client=http) as (read, write):
                    async with ClientSession(read, write, message_handler=recorder(changes)) as s:
                        out = await scenario(s, args.agent, changes)
        else:
            params = StdioServerParameters(command=command[0], args=command[1:], env=dict(os.environ))
            async with stdio_client(params, errlog=sys.stderr) as (read, write):
                async with ClientSession(read, write, message_handler=recorder(changes)) as s:
                    out = await scenario(s, args.agent, changes)
    except BaseException as exc:  # noqa: BLE001 - report any failure to the test
        status = None
        for e in _leaves(exc):
            response = getattr(e, "response", None)
            if response is not None and getattr(response, "status_code", None):
                status = response.status_code
        out = {"error": repr(exc), "status": status}
    print(json.dumps(out))


def _leaves(exc: BaseException):
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc
        if exc.__cause__ is not None:
            yield from _leaves(exc.__cause__)


if __name__ == "__main__":
    anyio.run(main)
