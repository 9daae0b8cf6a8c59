# The redis-py half of TestKeyStreamRedisPy. Phase "write" XADDs records
# of binary-safe values to KEY with * through the front (KEY is not
# archived yet: plain Redis) and writes what Redis answered to XRANGE, as
# hex, to WANT. Phase "read" runs after a cycle trimmed most of KEY and
# checks, through the front, that XRANGE, XREVRANGE, XREAD, XLEN and XINFO
# STREAM answer with archive and live tail as Redis did before the cycle,
# and that the write rule refuses every write to the archived key that
# could drop entries not folded yet, whatever the token, and lets appends,
# group commands and a trim at the watermark through. It prints "ok" or
# fails.
import json
import os
import sys

import redis

host, port, key = os.environ["RESP_HOST"], int(os.environ["RESP_PORT"]), os.environ["KEY"]


def conn(token):
    r = redis.Redis(host=host, port=port, password=token, decode_responses=False)
    # Raw replies: entries as [id, [name, value, ...]], in order.
    for c in ("XRANGE", "XREVRANGE", "XREAD"):
        r.set_response_callback(c, lambda resp, **kw: resp)
    return r


def hexed(entries):
    return [[e[0].hex(), [f.hex() for f in e[1]]] for e in entries]


def value(i):
    # Every byte: NUL, control bytes, CRLF and RESP framing, multi-byte
    # runes, and bytes that are not UTF-8 (the archive keeps any bytes).
    return [b"plain-%d" % i, b"nul\x00byte", b"crlf\r\n$3\r\nabc\r\n*2\r\n", b"", bytes(range(128)),
            "ünïcödé ✓ 🚀".encode(), "".join(map(chr, range(0x80, 0x800))).encode(), b"x" * 5000,
            b"\xff\xfe\x00\x80", bytes(range(256))][i % 10]


def write():
    w = conn(os.environ["WRITE_TOKEN"])
    for i in range(200):
        w.xadd(key, {b"n": b"%d" % i, b"v": value(i)}, id="*")
    entries = w.xrange(key, "-", "+")
    assert len(entries) == 200, len(entries)
    with open(os.environ["WANT"], "w") as f:
        json.dump(hexed(entries), f)


def read():
    with open(os.environ["WANT"]) as f:
        want = json.load(f)
    w = conn(os.environ["WRITE_TOKEN"])
    got = hexed(w.xrange(key, "-", "+"))
    assert got == want, "XRANGE - + differs: %d entries, want %d" % (len(got), len(want))
    got = hexed(w.xrevrange(key, "+", "-", count=15))
    assert got == list(reversed(want))[:15], "XREVRANGE COUNT 15 differs"
    rep = w.xread({key: "0"})
    assert len(rep) == 1 and rep[0][0] == key.encode(), rep[:1]
    assert hexed(rep[0][1]) == want, "XREAD from 0 differs"
    mid = bytes.fromhex(want[99][0]).decode()
    rep = w.xread({key: mid}, count=50)
    assert hexed(rep[0][1]) == want[100:150], "XREAD after entry 99 COUNT 50 differs"
    assert w.xlen(key) == 200, w.xlen(key)
    info = w.execute_command("XINFO", "STREAM", key)
    info = dict(zip(info[::2], info[1::2]))
    assert info[b"length"] == 200, info[b"length"]
    assert info[b"first-entry"][0].hex() == want[0][0], info[b"first-entry"]

    # Writes to the archived key: appends, group commands and trims at or
    # below the watermark run; anything that could drop entries the archive
    # has not folded, or delete, overwrite, expire or rename the key, is
    # refused (the write rule), to the write and the admin token alike.
    live = int(os.environ["LIVE"])
    refused = (("XTRIM", key, "MAXLEN", "0"), ("DEL", key), ("UNLINK", key),
               ("XDEL", key, bytes.fromhex(want[-1][0])), ("XADD", key, "MAXLEN", "1", "*", "a", "b"),
               ("XADD", key, "NOMKSTREAM", "MINID", bytes.fromhex(want[-1][0]), "*", "a", "b"),
               ("XADD", key, "LIMIT", "100", "MAXLEN", "~", "0", "*", "a", "b"), ("RENAME", key, "elsewhere"),
               ("EXPIRE", key, "1"), ("SET", key, "x"))
    a = conn(os.environ["ADMIN_TOKEN"])
    for c, who in ((w, "write"), (a, "admin")):
        for cmd in refused:
            try:
                c.execute_command(*cmd)
            except redis.exceptions.NoPermissionError as e:
                assert "archived stream" in str(e), e
            else:
                raise AssertionError("%s of the archived key ran with the %s token" % (cmd, who))
    direct = redis.Redis(host=host, port=int(os.environ["REDIS_PORT"]))
    assert direct.xlen(key) == live, "the refused writes changed the key: %d live, want %d" % (direct.xlen(key), live)
    new = w.xadd(key, {b"n": b"200", b"maxlen": b"field, not a trim"}, id="*")
    w.xgroup_create(key, "audit", id="0")
    got = w.xreadgroup("audit", "c1", {key: ">"}, count=3)
    assert len(got) == 1 and len(got[0][1]) == 3, got
    # A key that is not archived passes through unchanged.
    w.xadd("plain", {b"a": b"1"}, id="*")
    assert w.xtrim("plain", maxlen=0) == 1
    w.delete("plain")
    # A trim at the watermark runs (it removes folded entries only).
    a.xadd(key, {b"n": b"201"}, id="*", minid=info[b"echostore-watermark"].decode())
    assert direct.xlen(key) == live + 2
    assert a.xlen(key) == 202
    print("ok")


{"write": write, "read": read}[sys.argv[1]]()
