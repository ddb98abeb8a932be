"""discord.py against reef's fake Discord: log in (REST), connect to the gateway, receive
DMs, answer them (the first answer meets a 429), resume after the gateway asks for a
reconnect, and meet the fake's refusal of a message over 2,000 characters. Prints a line
per step, then what it saw as JSON."""

import asyncio
import json
import sys

import discord
import yarl
from discord.gateway import DiscordWebSocket
from discord.http import Route

api, gateway, token = sys.argv[1:4]
Route.BASE = api
DiscordWebSocket.DEFAULT_GATEWAY = yarl.URL(gateway)

seen = {"messages": [], "sent": [], "resumed": 0}
channels = []
intents = discord.Intents.default()
intents.message_content = True
client = discord.Client(intents=intents, guild_ready_timeout=0.1)


@client.event
async def on_ready():
    me = client.user
    seen["me"] = {"id": str(me.id), "name": me.name, "bot": me.bot}
    print("ready", flush=True)


async def finish_when_done():
    """After both answers and the resume (RESUMED follows the replayed events)."""
    if len(seen["sent"]) < 2 or seen["resumed"] < 1 or "too_long" in seen:
        return
    seen["too_long"] = {}
    try:
        await channels[-1].send("x" * 2001)
    except discord.HTTPException as err:
        seen["too_long"] = {"status": err.status, "code": err.code}
    await client.close()


@client.event
async def on_resumed():
    seen["resumed"] += 1
    await finish_when_done()


@client.event
async def on_message(message):
    if message.author.id == client.user.id:
        return
    seen["messages"].append(
        {
            "content": message.content,
            "dm": isinstance(message.channel, discord.DMChannel),
            "author": message.author.name,
            "id": str(message.id),
        }
    )
    channels.append(message.channel)
    sent = await message.channel.send("echo: " + message.content)
    seen["sent"].append(
        {"id": str(sent.id), "content": sent.content, "channel": str(sent.channel.id)}
    )
    print("sent", flush=True)
    await finish_when_done()


asyncio.run(asyncio.wait_for(client.start(token), 60))
print(json.dumps(seen), flush=True)
