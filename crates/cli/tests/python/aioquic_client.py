"""A second, independent QUIC client for reef's gateway: aioquic speaking the documented
framing (a 4-byte big-endian length, then JSON) on one bidirectional stream.

usage: aioquic_client.py HOST PORT CERT_PEM AGENT TEXT   (the token in REEF_TOKEN)

Trusts the gateway's certificate file (aioquic checks it like a CA) with the ALPN `reef/1`,
says hello, sends TEXT, and prints each event of the answering turn as a JSON line.
"""

import asyncio
import json
import os
import struct
import sys

from aioquic.asyncio import connect
from aioquic.quic.configuration import QuicConfiguration


async def main(host, port, cert, agent, text):
    config = QuicConfiguration(
        is_client=True, alpn_protocols=["reef/1"], server_name="localhost"
    )
    config.load_verify_locations(cert)
    async with connect(host, port, configuration=config) as client:
        reader, writer = await client.create_stream()

        def send(frame):
            body = json.dumps(frame).encode()
            writer.write(struct.pack(">I", len(body)) + body)

        async def receive():
            (length,) = struct.unpack(">I", await reader.readexactly(4))
            return json.loads(await reader.readexactly(length))

        send({"type": "hello", "token": os.environ["REEF_TOKEN"], "agent": agent})
        ready = await receive()
        assert ready["type"] == "ready", ready
        print(json.dumps(ready), flush=True)
        send({"type": "message", "text": text})
        accepted = await receive()
        assert accepted["type"] == "accepted", accepted
        print(json.dumps(accepted), flush=True)
        while True:
            frame = await receive()
            assert frame["type"] == "event", frame
            print(json.dumps(frame), flush=True)
            if frame["event"]["msg"]["type"] == "turn_ended":
                break
        writer.write_eof()


if __name__ == "__main__":
    host, port, cert, agent, text = sys.argv[1:6]
    asyncio.run(asyncio.wait_for(main(host, int(port), cert, agent, text), 120))
