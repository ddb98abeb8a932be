#!/usr/bin/env python3
"""Third-party MCP test server built on the official Python SDK (mcp 2.x).

Usage:
    py_server.py               # stdio transport (default)
    py_server.py --http PORT   # streamable HTTP on http://127.0.0.1:PORT/mcp

Environment:
    PY_SERVER_LOG    if set, a file to which the line "cancelled slow" is appended
                     when a running `slow` call is cancelled.
    PY_SERVER_TOKEN  over HTTP: if set, requests without `Authorization: Bearer TOKEN`
                     are answered 401.

Only protocol messages go to stdout; all logging goes to stderr.
"""

from __future__ import annotations

import argparse
import base64
import logging
import os
import sys
import urllib.request

import anyio
import anyio.to_thread
from mcp import types
from mcp.server.lowlevel import NotificationOptions
from mcp.server.mcpserver import Context, Image, MCPServer

logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format="py_server: %(message)s")
log = logging.getLogger("py_server")

# A valid 1x1 transparent PNG.
PNG_1X1_B64 = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

mcp = MCPServer("py-test-server", version="1.0.0", log_level="WARNING")

# MCPServer advertises tools.listChanged=false by default; we do send
# notifications/tools/list_changed (from add_tool), so advertise it.
_lowlevel = mcp._lowlevel_server
_orig_init_options = _lowlevel.create_initialization_options


def _init_options(notification_options=None, *args, **kwargs):
    if notification_options is None:
        notification_options = NotificationOptions(tools_changed=True)
    return _orig_init_options(notification_options, *args, **kwargs)


_lowlevel.create_initialization_options = _init_options  # type: ignore[method-assign]


def _error(text: str) -> types.CallToolResult:
    """An error tool result (isError=true) whose only content is exactly `text`.

    (Raising ToolError would also give isError=true, but the SDK prefixes the
    text with "Error executing tool <name>: ".)
    """
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)], is_error=True)


def _log_event(line: str) -> None:
    path = os.environ.get("PY_SERVER_LOG")
    if not path:
        return
    with open(path, "a", encoding="utf-8") as f:
        f.write(line + "\n")
        f.flush()


@mcp.tool()
def echo(text: str) -> str:
    """Return the given text unchanged."""
    return text


@mcp.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@mcp.tool()
async def slow(steps: int, ctx: Context) -> str:
    """Send `steps` progress notifications ~0.2 s apart, then return "done"."""
    try:
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
            await anyio.sleep(0.2)
        return "done"
    except anyio.get_cancelled_exc_class():  # asyncio.CancelledError on asyncio
        _log_event("cancelled slow")
        log.warning("slow was cancelled")
        raise


@mcp.tool()
def fail(reason: str) -> types.CallToolResult:
    """Always fail with an error result (isError=true) carrying `reason`."""
    return _error(reason)


@mcp.tool()
def read_file(path: str) -> str:
    """Return the contents of a file, or an error result with the OS error."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return f.read()
    except OSError as e:
        return _error(str(e))  # type: ignore[return-value]


@mcp.tool()
async def fetch(url: str) -> str:
    """Fetch a URL (timeout 5 s) and return its first 200 bytes."""

    def _get() -> str:
        with urllib.request.urlopen(url, timeout=5) as resp:
            return resp.read(200).decode("utf-8", errors="replace")

    try:
        return await anyio.to_thread.run_sync(_get)
    except Exception as e:  # noqa: BLE001 - report any failure as a tool error
        return _error(f"{type(e).__name__}: {e}")  # type: ignore[return-value]


@mcp.tool()
def image() -> Image:
    """Return a 1x1 PNG image."""
    return Image(data=base64.b64decode(PNG_1X1_B64), format="png")


@mcp.tool()
async def add_tool(name: str, ctx: Context) -> str:
    """Register a new tool called `name` and send notifications/tools/list_changed."""

    def dynamic() -> str:
        return f"{name} called"

    mcp.add_tool(dynamic, name=name, description=f"Dynamically added tool {name}")
    # Handshake-era clients (<= 2025-11-25): a plain notification. Sent on this
    # request's channel so that over streamable HTTP it rides the POST's SSE
    # response (it does not depend on the client having opened a GET stream).
    await ctx.session.send_notification(
        types.ToolListChangedNotification(), related_request_id=ctx.request_id
    )
    # 2026-07-28 clients receive it via subscriptions/listen.
    await ctx.notify_tools_changed()
    return "added"


@mcp.tool()
def crash() -> str:
    """Kill the server process immediately without answering."""
    sys.stderr.flush()
    os._exit(3)


@mcp.resource("note://hello", name="hello", mime_type="text/plain", description="A greeting note")
def note_hello() -> str:
    return "hello from python"


@mcp.prompt()
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


def _require_bearer(app, token: str):
    """Wraps an ASGI app: HTTP requests without `Authorization: Bearer TOKEN` get 401."""
    expected = f"Bearer {token}".encode()

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and dict(scope["headers"]).get(b"authorization") != expected:
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"missing or wrong bearer token"})
            return
        await app(scope, receive, send)

    return guarded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--http", metavar="PORT", type=int, help="serve streamable HTTP on 127.0.0.1:PORT/mcp")
    args = parser.parse_args()
    if args.http is not None:
        import uvicorn

        app = mcp.streamable_http_app(streamable_http_path="/mcp")
        token = os.environ.get("PY_SERVER_TOKEN")
        if token:
            app = _require_bearer(app, token)
        uvicorn.run(app, host="127.0.0.1", port=args.http, log_level="warning")
    else:
        mcp.run()


if __name__ == "__main__":
    main()
