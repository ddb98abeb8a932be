#!/usr/bin/env python3
"""A misbehaving MCP server over stdio, written without any SDK, for reef's bad-input tests.

Usage: bad_server.py MODE
  silent       reads requests and never answers (not even `initialize`)
  garbage      answers, but prints lines of garbage and non-JSON-RPC JSON before each answer
  many_tools   offers 10,000 tools
  huge_schema  offers `ok` and `huge`, whose input schema is over 1 MiB
  close_call   answers the handshake and listings, then exits in the middle of a tools/call
"""

import json
import sys

MODE = sys.argv[1] if len(sys.argv) > 1 else "silent"


def send(message):
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def tools():
    if MODE == "many_tools":
        return [
            {"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(10_000)
        ]
    if MODE == "huge_schema":
        big = {f"p{i}": {"type": "string", "description": "x" * 100} for i in range(10_000)}
        return [
            {"name": "ok", "description": "fine", "inputSchema": {"type": "object"}},
            {"name": "huge", "inputSchema": {"type": "object", "properties": big}},
        ]
    return [{"name": "echo", "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]


def answer(request):
    method = request.get("method")
    if method == "initialize":
        return {
            "protocolVersion": request["params"].get("protocolVersion", "2025-06-18"),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "bad-server", "version": "0"},
        }
    if method == "tools/list":
        return {"tools": tools()}
    if method == "tools/call":
        if MODE == "close_call":
            sys.exit(4)
        text = request["params"].get("arguments", {}).get("text", "")
        return {"content": [{"type": "text", "text": text}]}
    return None


for line in sys.stdin:
    try:
        request = json.loads(line)
    except ValueError:
        continue
    if MODE == "silent" or "id" not in request:
        continue
    if MODE == "garbage":
        sys.stdout.write("this is not json at all\n")
        send({"hello": "not json-rpc"})
    result = answer(request)
    if result is None:
        send({"jsonrpc": "2.0", "id": request["id"], "error": {"code": -32601, "message": "no such method"}})
    else:
        send({"jsonrpc": "2.0", "id": request["id"], "result": result})
