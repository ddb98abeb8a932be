"""Drives the fake Bot API with python-telegram-bot, the platform's most used client library:
if the fake's answers or its reading of requests strayed from the Bot API, the library would
fail to parse them. Prints what it saw as one JSON object."""

import asyncio
import json
import sys

from telegram import Bot, MessageEntity


async def main(base: str, token: str, chat: int) -> None:
    bot = Bot(token, base_url=f"{base}/bot", base_file_url=f"{base}/file/bot")
    async with bot:
        me = await bot.get_me()
        # A real long poll: the update is pushed while the request waits.
        updates = await bot.get_updates(timeout=5, allowed_updates=["message"])
        first = updates[0]
        photo = first.message.photo[-1]
        file = await bot.get_file(photo.file_id)
        data = await file.download_as_bytearray()
        # Confirm it, as reef does, by asking from the next offset.
        after = await bot.get_updates(offset=first.update_id + 1, timeout=0)
        sent = await bot.send_message(
            chat_id=chat,
            text="hello 🐠 world",
            entities=[MessageEntity(type=MessageEntity.BOLD, offset=6, length=2)],
        )
        await bot.send_chat_action(chat_id=chat, action="typing")
        try:
            await bot.send_message(chat_id=chat, text="x" * 4097)
            too_long = None
        except Exception as err:  # the library's BadRequest
            too_long = f"{type(err).__name__}: {err}"
        try:
            await bot.delete_webhook()
            retry_after = None
        except Exception as err:  # the library's RetryAfter
            retry_after = getattr(err, "retry_after", None)
            retry_after = retry_after.total_seconds() if hasattr(retry_after, "total_seconds") else retry_after
    print(json.dumps({
        "me": {"id": me.id, "username": me.username, "is_bot": me.is_bot},
        "update_id": first.update_id,
        "caption": first.message.caption,
        "chat_type": first.message.chat.type,
        "from": first.message.from_user.username,
        "photo_bytes": len(data),
        "after": len(after),
        "sent": {"id": sent.message_id, "text": sent.text,
                 "bold": [sent.parse_entity(e) for e in sent.entities]},
        "too_long": too_long,
        "retry_after": retry_after,
    }))


asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
