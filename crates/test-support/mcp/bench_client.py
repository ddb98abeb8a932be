#!/usr/bin/env python3
"""The baseline of reef's MCP client benchmark: the official Python SDK's client calling
`echo` of py_server.py (started directly over stdio, unconfined) N times after a warm-up.

Usage: bench_client.py N
Prints {"p50_us": …, "p99_us": …, "calls": N}.
"""

import json
import os
import sys
import time

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "py_server.py")


async def main() -> None:
    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as session:
            await session.initialize()
            for _ in range(20):
                await session.call_tool("echo", {"text": "warm"})
            samples = []
            for _ in range(calls):
                start = time.perf_counter()
                await session.call_tool("echo", {"text": "hello"})
                samples.append(time.perf_counter() - start)
    samples.sort()
    pick = lambda p: samples[round((len(samples) - 1) * p)] * 1e6  # noqa: E731
    print(json.dumps({"p50_us": pick(0.5), "p99_us": pick(0.99), "calls": calls}))


anyio.run(main)
