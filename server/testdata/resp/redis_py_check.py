"""Checks serve's RESP front with redis-py (server/resp_test.go runs it).

Environment: RESP_HOST, RESP_PORT, READ_TOKEN, WRITE_TOKEN, KEY (an
archived stream), WANT (a JSON file: the stream's entries as XADDed,
names and values in hex). Prints "ok" and exits 0, or says what differs
and exits 1.
"""
import binascii
import json
import os
import sys
import time

import redis

host, port = os.environ["RESP_HOST"], int(os.environ["RESP_PORT"])
read_tok, write_tok = os.environ["READ_TOKEN"], os.environ["WRITE_TOKEN"]
key = os.environ["KEY"].encode()
with open(os.environ["WANT"]) as f:
    want = [(e["id"].encode(), [(binascii.unhexlify(n), binascii.unhexlify(v)) for n, v in e["fields"]]) for e in json.load(f)]


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def entries(got):
    return [(i, list(fields.items())) for i, fields in got]


reader = redis.Redis(host=host, port=port, password=read_tok)
writer = redis.Redis(host=host, port=port, password=write_tok)

# History through XRANGE and XREAD: byte-identical to what was XADDed.
got = entries(reader.xrange(key, "-", "+"))
if got != want:
    fail("XRANGE - +: %d entries, want %d; first difference at %s" % (
        len(got), len(want), next((i for i, (a, b) in enumerate(zip(got, want)) if a != b), min(len(got), len(want)))))
if entries(reader.xrevrange(key, "+", "-", count=5)) != list(reversed(want))[:5]:
    fail("XREVRANGE + - COUNT 5")
mid = want[100][0].decode()
if entries(reader.xrange(key, "(" + mid, "+", count=10)) != want[101:111]:
    fail("XRANGE (id + COUNT 10")
xr = reader.xread({key: "0"})
if len(xr) != 1 or xr[0][0] != key or entries(xr[0][1]) != want:
    fail("XREAD STREAMS key 0: not the whole history")
xr = reader.xread({key: "0"}, count=7)
if entries(xr[0][1]) != want[:7]:
    fail("XREAD COUNT 7 STREAMS key 0")
if reader.xlen(key) != len(want):
    fail("XLEN %d, want %d" % (reader.xlen(key), len(want)))

# Pass-through: strings, a transaction, pub/sub.
writer.set(b"py:bin", b"\x00\xff\r\nvalue")
if reader.get(b"py:bin") != b"\x00\xff\r\nvalue":
    fail("GET of a binary value")
pipe = writer.pipeline(transaction=True)
pipe.set(b"py:n", 1).incr(b"py:n").get(b"py:n")
if pipe.execute() != [True, 2, b"2"]:
    fail("MULTI/EXEC")
p = reader.pubsub()
p.subscribe("py:ch")
deadline = time.monotonic() + 10
msg = None
while time.monotonic() < deadline:
    m = p.get_message(timeout=1.0)
    if m and m["type"] == "subscribe":
        break
writer.publish("py:ch", b"hello \x00")
while time.monotonic() < deadline:
    m = p.get_message(timeout=1.0)
    if m and m["type"] == "message":
        msg = m
        break
if msg is None or msg["data"] != b"hello \x00":
    fail("SUBSCRIBE: message %r" % (msg,))
p.close()

# Scopes: the read token cannot write; a wrong token is refused.
try:
    reader.set(b"py:x", b"1")
    fail("SET with the read token succeeded")
except redis.exceptions.ResponseError as e:
    if "NOPERM" not in str(e) and type(e).__name__ != "NoPermissionError":
        fail("SET with the read token: %s" % e)
try:
    redis.Redis(host=host, port=port, password="wrong-token-wrong-token").ping()
    fail("PING with a wrong token succeeded")
except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
    if "WRONGPASS" not in str(e) and not isinstance(e, redis.exceptions.AuthenticationError):
        fail("PING with a wrong token: %s" % e)
try:
    redis.Redis(host=host, port=port).get(b"py:bin")
    fail("GET without a token succeeded")
except (redis.exceptions.AuthenticationError, redis.exceptions.ResponseError) as e:
    if "NOAUTH" not in str(e) and "Authentication" not in str(e):
        fail("GET without a token: %s" % e)
print("ok")
