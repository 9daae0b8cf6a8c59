"""An independent reader of echostore's sealed envelopes (encryption at rest),
written from docs/FORMAT.md, "Sealed objects", alone: Python 3 and the
cryptography package (Debian's python3-cryptography) for AES-256-GCM and
HKDF-SHA256.

    python3 sealed.py KEYFILE DIR     open every object of the file:// remote
                                      DIR; print "KEY LENGTH SHA256" of each
                                      plaintext, or "KEY FAIL REASON"
    python3 sealed.py KEYFILE --golden PATH OBJECTKEY
                                      open one envelope stored under OBJECTKEY
"""

import base64
import hashlib
import os
import struct
import sys

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

MAGIC = b"ESRE"
HEADER = 48
CHUNK = 65536
TAG = 16


class EnvelopeError(Exception):
    pass


def parse_key(b):
    """A key file: 32 bytes, or 64 hex digits, or 44 base64 characters; the
    text forms may end with one \\n or \\r\\n."""
    if len(b) == 32:
        return b
    t = b
    if t.endswith(b"\n"):
        t = t[:-1]
        if t.endswith(b"\r"):
            t = t[:-1]
    if len(t) == 64:
        try:
            return bytes.fromhex(t.decode("ascii"))
        except (ValueError, UnicodeDecodeError):
            raise EnvelopeError("not hex")
    if len(t) == 44:
        try:
            k = base64.b64decode(t, validate=True)
        except ValueError:
            raise EnvelopeError("not base64")
        if len(k) == 32:
            return k
    raise EnvelopeError("no key")


def key_id(key):
    return hashlib.sha256(b"echostore/sealed/key-id/v1\x00" + key).digest()[:8]


def open_envelope(keys, objkey, data):
    """The plaintext of the envelope data stored under objkey; keys maps key
    ids to keys."""
    if data[:4] != MAGIC:
        raise EnvelopeError("not sealed")
    if len(data) < HEADER:
        raise EnvelopeError("truncated header")
    version, flags = struct.unpack_from("<HH", data, 4)
    if version != 1 or flags != 0:
        raise EnvelopeError("version %d flags %d" % (version, flags))
    header = data[:HEADER]
    kid, nonce = data[8:16], data[16:48]
    if kid not in keys:
        raise EnvelopeError("unknown key %s" % kid.hex())
    okey = HKDF(algorithm=hashes.SHA256(), length=32, salt=nonce,
                info=b"echostore/sealed/object/v1").derive(keys[kid])
    gcm = AESGCM(okey)
    aad = header + objkey.encode("utf-8")
    body = data[HEADER:]
    if not body:
        raise EnvelopeError("no chunk")
    out = []
    i = 0
    while body:
        c, body = body[:CHUNK + TAG], body[CHUNK + TAG:]
        last = not body
        if len(c) < TAG or (last and len(c) == TAG and i > 0) or (not last and len(c) != CHUNK + TAG):
            raise EnvelopeError("chunk %d of %d bytes" % (i, len(c)))
        gnonce = struct.pack(">Q", i) + b"\x00\x00\x00" + (b"\x01" if last else b"\x00")
        try:
            out.append(gcm.decrypt(gnonce, c, aad))
        except InvalidTag:
            raise EnvelopeError("chunk %d does not authenticate" % i)
        i += 1
    return b"".join(out)


def plain_size(n):
    body = n - HEADER
    if body < TAG:
        return None
    chunks = (body + CHUNK + TAG - 1) // (CHUNK + TAG)
    p = body - chunks * TAG
    if chunks > 1 and p <= (chunks - 1) * CHUNK:
        return None
    return p


def main(argv):
    with open(argv[1], "rb") as f:
        key = parse_key(f.read())
    keys = {key_id(key): key}
    if argv[2] == "--golden":
        with open(argv[3], "rb") as f:
            data = f.read()
        p = open_envelope(keys, argv[4], data)
        print("%s %d %s %s" % (argv[4], len(p), hashlib.sha256(p).hexdigest(), key_id(key).hex()))
        return 0
    root = argv[2]
    for d, dirs, files in os.walk(root):
        dirs[:] = sorted(x for x in dirs if not x.startswith("."))
        for name in sorted(files):
            if name.startswith("."):
                continue
            path = os.path.join(d, name)
            objkey = os.path.relpath(path, root).replace(os.sep, "/")
            with open(path, "rb") as f:
                data = f.read()
            if plain_size(len(data)) is None:
                print("%s FAIL size %d is no envelope's" % (objkey, len(data)))
                continue
            try:
                p = open_envelope(keys, objkey, data)
            except EnvelopeError as e:
                print("%s FAIL %s" % (objkey, e))
                continue
            if len(p) != plain_size(len(data)):
                print("%s FAIL plaintext size" % objkey)
                continue
            print("%s %d %s" % (objkey, len(p), hashlib.sha256(p).hexdigest()))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
