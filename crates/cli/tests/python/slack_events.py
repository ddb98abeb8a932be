"""Slack's Events API as Slack sends it, signed by slack_sdk's own signature helper, to a
reef daemon's /hooks/slack/NAME: the URL verification challenge, a request with a wrong
signature, one with a timestamp ten minutes old, and an event. Prints each answer's status
(and the challenge's body) as JSON."""

import json
import sys
import time
import urllib.error
import urllib.request

from slack_sdk.signature import SignatureVerifier

base, name, secret, event_file = sys.argv[1:5]
signer = SignatureVerifier(signing_secret=secret)
url = f"{base}/hooks/slack/{name}"


def post(body: str, timestamp: int, signature: str):
    request = urllib.request.Request(
        url,
        data=body.encode(),
        method="POST",
        headers={
            "Content-Type": "application/json",
            "X-Slack-Request-Timestamp": str(timestamp),
            "X-Slack-Signature": signature,
        },
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()


def signed(body: str, timestamp: int):
    return post(body, timestamp, signer.generate_signature(timestamp=str(timestamp), body=body))


now = int(time.time())
challenge = json.dumps(
    {"token": "t", "challenge": "3eZbrw1aBm2rZgRNFdxV2595E9CY3gmdALWMmHkvFXO7tYXAYM8P",
     "type": "url_verification"}
)
event = open(event_file).read()
seen = {}
seen["challenge"] = signed(challenge, now)
seen["wrong_signature"] = post(event, now, "v0=" + "0" * 64)
seen["stale"] = signed(event, now - 600)
seen["event"] = signed(event, now)
print(json.dumps(seen), flush=True)
