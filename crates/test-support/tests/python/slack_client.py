"""slack_sdk against reef's fake Slack: auth.test, Socket Mode (apps.connections.open, hello,
an events_api envelope acknowledged, a reply posted in its thread after a 429 the client's
retry handler waits out), a `disconnect` followed by a new connection that gets the next
envelope, and the fake's refusals as the library's own errors. Prints a line per step, then
what it saw as JSON."""

import json
import sys
import threading

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler
from slack_sdk.socket_mode import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

api, bot_token, app_token = sys.argv[1:4]
web = WebClient(token=bot_token, base_url=api + "/")
web.retry_handlers.append(RateLimitErrorRetryHandler(max_retry_count=2))
seen = {"auth": web.auth_test().data, "events": [], "posted": []}
try:
    WebClient(token="xoxb-wrong", base_url=api + "/").auth_test()
except SlackApiError as err:
    seen["wrong_token"] = err.response["error"]

client = SocketModeClient(app_token=app_token, web_client=web)
two = threading.Event()


def on_request(client: SocketModeClient, request: SocketModeRequest):
    if request.type != "events_api":
        return
    client.send_socket_mode_response(SocketModeResponse(envelope_id=request.envelope_id))
    event = request.payload["event"]
    seen["events"].append(
        {"envelope": request.envelope_id, "text": event["text"], "type": event["type"]}
    )
    posted = client.web_client.chat_postMessage(
        channel=event["channel"], text="echo: " + event["text"], thread_ts=event["ts"]
    )
    seen["posted"].append({"ts": posted["ts"], "thread_ts": posted["message"]["thread_ts"]})
    print("posted", flush=True)
    if len(seen["posted"]) == 2:
        two.set()


client.socket_mode_request_listeners.append(on_request)
client.connect()
print("connected", flush=True)
if not two.wait(30):
    sys.exit("the second envelope never came")
try:
    web.chat_postMessage(channel="D1", text="")
except SlackApiError as err:
    seen["empty"] = err.response["error"]
client.close()
print(json.dumps(seen), flush=True)
