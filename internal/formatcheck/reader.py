#!/usr/bin/env python3
"""An independent reader of echostore's archive, written from docs/FORMAT.md.

It opens a file:// remote (the object-store layout is the durable
contract), folds the remote log of an archive volume to its head and prints
the retained records of the archived stream as JSON lines, the same bytes as
`echostore stream read Q S --archive-only` prints on the node that pushed
them.

    reader.py REMOTE_DIR Q S [--reverse]
    reader.py REMOTE_DIR --key K [--reverse]
    reader.py REMOTE_DIR --volume V [--reverse]

With Q S or --key K (the stream at Redis key K, given as UTF-8 text or as
hex:<its bytes in hex>) the volume is derived from the stream ("Names",
"Streams at a key") and its owner (archive.owner), when recorded, must be
that stream; --volume V reads V whatever its owner.

REMOTE_DIR is the folder of a file:// remote (or the file:// URL itself).
Exit status 0 on success; 1 with a message on stderr if anything is corrupt
or missing. Standard library only, plus `zstandard` for segment frames.

Every section of this file names the section of docs/FORMAT.md it follows;
nothing here comes from the Go source. The record page decoder dispatches on
the page's version byte (RECORD_PAGE_DECODERS), so a new page version is one
more function there.
"""

import base64
import hashlib
import os
import re
import struct
import sys


class Corrupt(Exception):
    """Stored bytes break a rule of the format."""


# --- Common encoding -------------------------------------------------------

def _crc32c_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data):
    """CRC-32C (Castagnoli, reflected, init and final XOR 0xFFFFFFFF)."""
    c = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        c = t[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283


class Dec:
    """Reads the remote's little-endian fields and uvarints from a buffer."""

    def __init__(self, what, b, off=0):
        self.what, self.b, self.off = what, b, off

    def fail(self, msg):
        raise Corrupt("%s: at byte %d: %s" % (self.what, self.off, msg))

    def take(self, n):
        if n < 0 or self.off + n > len(self.b):
            self.fail("truncated: need %d bytes, %d left" % (n, len(self.b) - self.off))
        p = self.b[self.off:self.off + n]
        self.off += n
        return p

    def u16(self):
        return struct.unpack("<H", self.take(2))[0]

    def u32(self):
        return struct.unpack("<I", self.take(4))[0]

    def u64(self):
        return struct.unpack("<Q", self.take(8))[0]

    def uvarint(self):
        v, shift = 0, 0
        for i in range(10):
            if self.off >= len(self.b):
                self.fail("truncated uvarint")
            c = self.b[self.off]
            self.off += 1
            v |= (c & 0x7F) << shift
            if c < 0x80:
                if v >= 1 << 64:
                    self.fail("uvarint overflows 64 bits")
                return v
            shift += 7
        self.fail("uvarint longer than 10 bytes")

    def bytes(self, max_len):
        n = self.uvarint()
        if n > max_len:
            self.fail("length %d exceeds %d" % (n, max_len))
        return self.take(n)

    def string(self, max_len):
        raw = self.bytes(max_len)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.fail("string is not UTF-8")

    def end(self):
        if self.off != len(self.b):
            self.fail("%d trailing bytes" % (len(self.b) - self.off))


MIB = 1 << 20
NAME_RE = re.compile(r"[A-Za-z0-9._-]{1,128}\Z")


def check_volume_name(v):
    if not NAME_RE.match(v) or v in (".", "..") or v.startswith("."):
        raise Corrupt("bad volume name %r" % v)


# --- The Graft remote: stores and the file remote -------------------------

class FileRemote:
    """A file:// remote: the object at key K is the file <root>/K."""

    def __init__(self, root):
        if root.startswith("file://"):
            root = root[len("file://"):]
        self.root = root

    def _path(self, key):
        return os.path.join(self.root, *key.split("/"))

    def list(self, prefix):
        """Keys under prefix, ascending bytewise; dot-names are skipped."""
        folder, _, _ = prefix.rpartition("/")
        base = self._path(folder) if folder else self.root
        keys = []
        if not os.path.isdir(base):
            return keys
        for dirpath, dirnames, filenames in os.walk(base):
            dirnames[:] = [d for d in dirnames if not d.startswith(".")]
            for f in filenames:
                if f.startswith("."):
                    continue
                rel = os.path.relpath(os.path.join(dirpath, f), self.root)
                key = "/".join(rel.split(os.sep))
                if key.startswith(prefix):
                    keys.append(key)
        keys.sort(key=lambda k: k.encode("utf-8"))
        return keys

    def get(self, key):
        with open(self._path(key), "rb") as f:
            return f.read()

    def get_range(self, key, off, n):
        with open(self._path(key), "rb") as f:
            f.seek(off)
            return f.read(n)


# --- Key layout -------------------------------------------------------------

MAX_LSN = (1 << 64) - 2


def lsn_hex(lsn):
    return "%016x" % ((1 << 64) - 1 - lsn)


def parse_lsn_hex(s):
    if len(s) != 16 or not re.match(r"[0-9a-f]{16}\Z", s):
        raise Corrupt("%r is not 16 lower-case hex digits" % s)
    lsn = (1 << 64) - 1 - int(s, 16)
    if not 1 <= lsn <= MAX_LSN:
        raise Corrupt("lsn %d out of range" % lsn)
    return lsn


def log_prefix(v):
    return "volumes/%s/log/" % v


def log_key(v, lsn):
    return log_prefix(v) + lsn_hex(lsn)


def checkpoint_prefix(v):
    return "volumes/%s/checkpoints/" % v


# --- Objects: common rules ---------------------------------------------------

def body_of(what, b):
    """Checks the CRC-32C trailer and returns the bytes before it."""
    if len(b) < 12:
        raise Corrupt("%s: truncated: %d bytes" % (what, len(b)))
    body, (stored,) = b[:-4], struct.unpack("<I", b[-4:])
    if crc32c(body) != stored:
        raise Corrupt("%s: CRC-32C mismatch" % what)
    return body


def header(d, magic, allowed_flags):
    if d.take(4) != magic:
        d.fail("bad magic, want %r" % magic)
    if d.u16() != 1:
        d.fail("unknown version")
    flags = d.u16()
    if flags & ~allowed_flags:
        d.fail("unknown flags %#x" % flags)
    return flags


# --- Commit object (ESRC) ------------------------------------------------------

class FrameRef:
    __slots__ = ("offset", "length", "raw_length", "crc", "pages")


def decode_frame_ref(d):
    f = FrameRef()
    f.offset = d.uvarint()
    f.length = d.uvarint()
    f.raw_length = d.uvarint()
    f.crc = d.u32()
    n = d.uvarint()
    if f.offset > 1 << 62:
        d.fail("frame offset %d" % f.offset)
    if not 1 <= f.length <= 2 * MIB + 1024:
        d.fail("frame length %d" % f.length)
    if f.raw_length > MIB:
        d.fail("frame raw length %d" % f.raw_length)
    if n < 1:
        d.fail("frame with no pages")
    f.pages = []
    prev = None
    for i in range(n):  # a run of its own: the first index is absolute
        v = d.uvarint()
        if i == 0:
            idx = v
        else:
            if v == 0:
                d.fail("page indexes not strictly ascending")
            idx = prev + v
        prev = idx
        off, ln = d.uvarint(), d.uvarint()
        if off + ln > f.raw_length or ln > MIB:
            d.fail("page %d at %d+%d outside a frame of %d bytes" % (idx, off, ln, f.raw_length))
        f.pages.append((idx, off, ln))
    return f


class Commit:
    __slots__ = ("lsn", "local_from", "local_to", "prev", "volume", "checkpoint",
                 "meta", "inline", "segments")


def decode_commit(b):
    d = Dec("commit", body_of("commit", b))
    c = Commit()
    c.checkpoint = bool(header(d, b"ESRC", 1) & 1)
    c.lsn = d.u64()
    c.local_from = d.u64()
    c.local_to = d.u64()
    c.prev = d.take(32)
    c.volume = d.string(256)
    check_volume_name(c.volume)
    if not 1 <= c.lsn <= MAX_LSN:
        d.fail("remote lsn %d out of range" % c.lsn)
    if c.local_from > c.local_to:
        d.fail("local range reversed")
    if c.lsn == 1 and c.prev != bytes(32):
        d.fail("lsn 1 names a predecessor")
    c.meta = {}
    last = None
    for _ in range(d.uvarint()):
        k = d.bytes(255)
        v = d.bytes(MIB)
        if not k or (last is not None and k <= last):
            d.fail("metadata keys not strictly ascending")
        last = k
        c.meta[k] = v
    c.inline = []
    prev = None
    for i in range(d.uvarint()):  # one run
        v = d.uvarint()
        if i == 0:
            idx = v
        else:
            if v == 0:
                d.fail("inline page indexes not strictly ascending")
            idx = prev + v
        prev = idx
        c.inline.append((idx, d.bytes(MIB)))
    c.segments = []
    seg_re = re.compile(r"segments/%s/[0-9a-f]{32}\Z" % re.escape(c.volume))
    for _ in range(d.uvarint()):
        key = d.string(1024)
        if not seg_re.match(key):
            d.fail("segment key %r" % key)
        nf = d.uvarint()
        if nf < 1:
            d.fail("segment with no frames")
        c.segments.append((key, [decode_frame_ref(d) for _ in range(nf)]))
    d.end()
    seen = set(i for i, _ in c.inline)
    n = len(c.inline)
    for _, frames in c.segments:
        for f in frames:
            for idx, _, _ in f.pages:
                seen.add(idx)
                n += 1
    if len(seen) != n:
        raise Corrupt("commit %d: a page index appears twice" % c.lsn)
    return c


# --- Checkpoint marker (ESRK), tombstone (ESRT) -----------------------------

def decode_marker(b):
    d = Dec("checkpoint marker", body_of("checkpoint marker", b))
    header(d, b"ESRK", 0)
    lsn = d.u64()
    h = d.take(32)
    v = d.string(256)
    d.end()
    check_volume_name(v)
    return v, lsn, h


def is_tombstone(b):
    return b[:4] == b"ESRT"


def decode_tombstone(b):
    d = Dec("tombstone", body_of("tombstone", b))
    header(d, b"ESRT", 0)
    lsn = d.u64()
    v = d.string(256)
    d.end()
    return v, lsn


# --- Identity object (ESRI): big-endian, unlike the log's objects -----------

def decode_identity(b):
    """(id, created Unix ns) of the remote's identity object."""
    if len(b) != 36:
        raise Corrupt("identity: %d bytes, want 36" % len(b))
    if struct.unpack(">I", b[32:])[0] != crc32c(b[:32]):
        raise Corrupt("identity: CRC-32C mismatch")
    magic, version, flags, rid, created = struct.unpack(">4sHH16sQ", b[:32])
    if magic != b"ESRI" or version != 1 or flags != 0 or rid == bytes(16):
        raise Corrupt("identity: magic, version, flags or a zero id")
    return rid, created


# --- Segment object (ESRS): reading one frame --------------------------------

def decompress_frame(z, raw_length):
    import zstandard  # only segments need it

    obj = zstandard.ZstdDecompressor().decompressobj()
    try:
        raw = obj.decompress(z)
    except zstandard.ZstdError as e:
        raise Corrupt("zstd: %s" % e)
    if not obj.eof or obj.unused_data:
        raise Corrupt("not exactly one whole zstd frame")
    return raw


def decode_segment(b):
    """A whole segment object: its frame references and pages [(index, bytes)].

    Readers of the log never need it (a commit carries the frame references);
    it checks the footer and every frame, for tools and tests.
    """
    body = body_of("segment", b)
    if len(body) < 12:
        raise Corrupt("segment: truncated")
    (flen,) = struct.unpack("<I", body[-4:])
    body = body[:-4]
    if flen > len(body) - 8:
        raise Corrupt("segment: footer length %d exceeds the object" % flen)
    frames_end = len(body) - flen
    header(Dec("segment", body[:8]), b"ESRS", 0)
    d = Dec("segment footer", body[frames_end:])
    n = d.uvarint()
    refs, pages, nxt = [], [], 8
    for _ in range(n):
        f = decode_frame_ref(d)
        if f.offset != nxt or f.offset + f.length > frames_end:
            raise Corrupt("segment: frame at %d+%d, want it at %d" % (f.offset, f.length, nxt))
        if pages and f.pages[0][0] <= pages[-1][0]:
            raise Corrupt("segment: page indexes not ascending across frames")
        raw = frame_pages(b[f.offset:f.offset + f.length], f, "segment")
        pages.extend((idx, raw[off:off + ln]) for idx, off, ln in f.pages)
        refs.append(f)
        nxt += f.length
    d.end()
    if n == 0 or nxt != frames_end:
        raise Corrupt("segment: frames do not cover the object up to its footer")
    return refs, pages


def frame_pages(z, f, what):
    """Verifies one frame's compressed bytes against its reference and
    returns the decompressed frame."""
    if len(z) != f.length:
        raise Corrupt("%s frame@%d: %d bytes, reference says %d" % (what, f.offset, len(z), f.length))
    if crc32c(z) != f.crc:
        raise Corrupt("%s frame@%d: CRC-32C mismatch" % (what, f.offset))
    if len(z) < 5 or z[:4] != b"\x28\xb5\x2f\xfd" or (not z[4] & 0x04 and f.raw_length != 0):
        raise Corrupt("%s frame@%d: not a zstd frame with a content checksum" % (what, f.offset))
    raw = decompress_frame(z, f.raw_length)
    if len(raw) != f.raw_length:
        raise Corrupt("%s frame@%d: %d bytes decompressed, reference says %d" % (what, f.offset, len(raw), f.raw_length))
    return raw


class Volume:
    """The state of a volume at its remote head (Reading a volume from the remote)."""

    def __init__(self, remote, name):
        check_volume_name(name)
        self.remote, self.name = remote, name
        self.pages = {}  # index -> ("inline", data) | ("frame", segment key, FrameRef, offset, length)
        self.meta = {}
        self.lsn = 0
        self._frames = {}

    def _read_commit(self, lsn):
        b = self.remote.get(log_key(self.name, lsn))
        if is_tombstone(b):
            v, n = decode_tombstone(b)
            raise Corrupt("lsn %d of %s is a tombstone (of %s@%d): the log was trimmed; start again" % (lsn, self.name, v, n))
        c = decode_commit(b)
        if c.volume != self.name or c.lsn != lsn:
            raise Corrupt("%s holds %s@%d" % (log_key(self.name, lsn), c.volume, c.lsn))
        return c, hashlib.sha256(b).digest()

    def _apply(self, c):
        if c.checkpoint:
            self.pages, self.meta = {}, {}
        for idx, data in c.inline:
            self.pages[idx] = ("inline", data)
        for key, frames in c.segments:
            for f in frames:
                for idx, off, ln in f.pages:
                    self.pages[idx] = ("frame", key, f, off, ln)
        self.meta.update(c.meta)
        self.lsn = c.lsn

    def fold(self):
        """Steps 1-3: start at the newest checkpoint, replay up to the head."""
        prev_hash = bytes(32)
        markers = self.remote.list(checkpoint_prefix(self.name))
        if markers:
            rest = markers[0][len(checkpoint_prefix(self.name)):]
            m = re.match(r"([0-9a-f]{16})-([0-9a-f]{64})\Z", rest)
            if not m:
                raise Corrupt("checkpoint marker key %r" % markers[0])
            lsn, want = parse_lsn_hex(m.group(1)), bytes.fromhex(m.group(2))
            v, mlsn, mh = decode_marker(self.remote.get(markers[0]))
            if (v, mlsn, mh) != (self.name, lsn, want):
                raise Corrupt("checkpoint marker %s names another commit" % markers[0])
            c, h = self._read_commit(lsn)
            if h != want or not c.checkpoint:
                raise Corrupt("checkpoint %d: hash or flag does not match its marker" % lsn)
            self._apply(c)
            prev_hash = h
        logs = self.remote.list(log_prefix(self.name))
        if not logs:
            return
        head = parse_lsn_hex(logs[0][len(log_prefix(self.name)):])
        for lsn in range(self.lsn + 1, head + 1):
            c, h = self._read_commit(lsn)
            if c.prev != prev_hash:
                raise Corrupt("lsn %d names another predecessor" % lsn)
            self._apply(c)
            prev_hash = h

    def page(self, idx):
        """Step 4: the bytes of page idx (None if no reference)."""
        ref = self.pages.get(idx)
        if ref is None:
            return None
        if ref[0] == "inline":
            return ref[1]
        _, key, f, off, ln = ref
        raw = self._frames.get((key, f.offset))
        if raw is None:
            raw = frame_pages(self.remote.get_range(key, f.offset, f.length), f, key)
            self._frames = {(key, f.offset): raw}  # one frame cached: pages are read in order
        return raw[off:off + ln]


# --- Archive volumes -----------------------------------------------------------

ARCHIVE_BASE = 1 << 49


def u64be(v, what):
    if len(v) != 8:
        raise Corrupt("%s is %d bytes, want 8" % (what, len(v)))
    return struct.unpack(">Q", v)[0]


def archive_range(vol):
    """(low, seq, W) of the retained pages, from the archive metadata."""
    seq = vol.meta.get(b"archive.seq")
    if seq is None:
        return 0, 0, None
    w = vol.meta.get(b"archive.w")
    if w is None:
        raise Corrupt("archive.seq without archive.w")
    seq = u64be(seq, "archive.seq")
    w = archive_id(w, "archive.w")
    if not 1 <= seq <= (1 << 64) - 1 - ARCHIVE_BASE:
        raise Corrupt("archive.seq %d" % seq)
    low = vol.meta.get(b"archive.low")
    low = 0 if low is None else u64be(low, "archive.low")
    if low > seq:
        raise Corrupt("archive.low %d above archive.seq %d" % (low, seq))
    return low, seq, w


def decode_owner(b):
    """archive.owner (Archive metadata): ("queue", Q, S) for Q/S, ("key", K)
    for {key} then K's bytes."""
    if b.startswith(b"{key}"):
        k = b[len(b"{key}"):]
        if not 1 <= len(k) <= 1024 or k.startswith(b"emq:"):
            raise Corrupt("archive.owner %r is not a stream key" % b)
        return ("key", k)
    q, sep, s = b.partition(b"/")
    if not sep:
        raise Corrupt("archive.owner %r is not queue/stream" % b)
    try:
        q, s = q.decode("ascii"), s.decode("ascii")
    except UnicodeDecodeError:
        raise Corrupt("archive.owner %r is not queue/stream" % b)
    for n in (q, s):
        if not re.fullmatch(r"[A-Za-z0-9._-]{1,128}", n) or n in (".", ".."):
            raise Corrupt("archive.owner %r is not queue/stream" % b)
    return ("queue", q, s)


def key_volume(k):
    """The archive volume of the stream at key K (Streams at a key)."""
    e = "".join(chr(c) if (0x30 <= c <= 0x39 or 0x41 <= c <= 0x5A or 0x61 <= c <= 0x7A or c in b".-")
                else "_%02x" % c for c in k)
    if len("archive-key.") + len(e) <= 128:
        return "archive-key." + e
    return "archive-keyh." + hashlib.sha256(k).hexdigest()


def archive_id(b, what):
    """An id of the archive metadata: 8 bytes, a branded id; 16 bytes,
    milliseconds then sequence. Returned as the Redis id (ms, seq)."""
    if len(b) == 8:
        return branded_to_xid(struct.unpack(">Q", b)[0])
    if len(b) == 16:
        return struct.unpack(">QQ", b)
    raise Corrupt("%s: %d bytes, want 8 or 16" % (what, len(b)))


def page_fields(body, off, f):
    """The f (name, value) pairs of a record page's body from offset off:
    each a 4-byte length and its bytes, filling the body exactly."""
    fields = []

    def take():
        nonlocal off
        if off + 4 > len(body):
            raise Corrupt("record page: a length runs past the CRC")
        (n,) = struct.unpack(">I", body[off:off + 4])
        if off + 4 + n > len(body):
            raise Corrupt("record page: a field runs past the CRC")
        s = body[off + 4:off + 4 + n]
        off += 4 + n
        return s

    for _ in range(f):
        name = take()
        fields.append((name, take()))
    if off != len(body):
        raise Corrupt("record page: %d bytes after the last field" % (len(body) - off))
    return fields


def decode_record_page_v1(b):
    """Record page, version 1: ((ms, seq), [(name, value), ...]) as bytes."""
    if len(b) < 29:
        raise Corrupt("record page of %d bytes" % len(b))
    body, (stored,) = b[:-4], struct.unpack(">I", b[-4:])
    if crc32c(body) != stored:
        raise Corrupt("record page: CRC-32C mismatch")
    rid, f = struct.unpack(">QI", body[5:17])
    if f == 0:
        raise Corrupt("record page with no fields")
    fields, names = page_fields(body, 17, f), set()
    for name, value in fields:
        for b in (name, value):
            try:
                b.decode("utf-8")
            except UnicodeDecodeError:
                raise Corrupt("record page: a name or value is not UTF-8")
        if name in names:
            raise Corrupt("record page: duplicate field %r" % name)
        names.add(name)
    return branded_to_xid(rid), fields


def decode_record_page_v2(b):
    """Record page, version 2: ((ms, seq), [(name, value), ...]) as bytes;
    any bytes, names may repeat."""
    if len(b) < 37:
        raise Corrupt("record page of %d bytes" % len(b))
    body, (stored,) = b[:-4], struct.unpack(">I", b[-4:])
    if crc32c(body) != stored:
        raise Corrupt("record page: CRC-32C mismatch")
    ms, seq, f = struct.unpack(">QQI", body[5:25])
    if f == 0:
        raise Corrupt("record page with no fields")
    return (ms, seq), page_fields(body, 25, f)


def decode_record_page_v3(b):
    """Record page, version 3: the head of a record spanning pages.
    ("head", (ms, seq), k, L, first part of the body)."""
    if len(b) < 38:
        raise Corrupt("record page of %d bytes" % len(b))
    body, (stored,) = b[:-4], struct.unpack(">I", b[-4:])
    if crc32c(body) != stored:
        raise Corrupt("record page: CRC-32C mismatch")
    ms, seq, k, total = struct.unpack(">QQIQ", body[5:33])
    if k == 0:
        raise Corrupt("record page version 3 without continuations")
    if total > MAX_RECORD_BODY:
        raise Corrupt("record body of %d bytes, above %d" % (total, MAX_RECORD_BODY))
    return "head", (ms, seq), k, total, body[33:]


def decode_record_page_v4(b):
    """Record page, version 4: continuation i of a record spanning pages.
    ("cont", (ms, seq), i, None, its part of the body)."""
    if len(b) < 30:
        raise Corrupt("record page of %d bytes" % len(b))
    body, (stored,) = b[:-4], struct.unpack(">I", b[-4:])
    if crc32c(body) != stored:
        raise Corrupt("record page: CRC-32C mismatch")
    ms, seq, i = struct.unpack(">QQI", body[5:25])
    if i == 0:
        raise Corrupt("continuation 0")
    return "cont", (ms, seq), i, None, body[25:]


MAX_RECORD_BODY = 1 << 30  # archive.MaxRecordBytes, 1 GiB: a larger body is corrupt


def span_record(rid, total, parts):
    """The record of a head and its continuations' parts, in order: the
    body as a version-2 page holds it (f, then the fields)."""
    body = b"".join(parts)
    if len(body) != total:
        raise Corrupt("record spanning pages: %d bytes, its head says %d" % (len(body), total))
    if len(body) < 4:
        raise Corrupt("record spanning pages: no field count")
    (f,) = struct.unpack(">I", body[:4])
    if f == 0:
        raise Corrupt("record page with no fields")
    return rid, page_fields(body, 4, f)


# A new page version is one more entry here. Versions 1 and 2 decode to a
# record; 3 and 4 to a piece of one (read_archive puts them together).
RECORD_PAGE_DECODERS = {1: decode_record_page_v1, 2: decode_record_page_v2,
                        3: decode_record_page_v3, 4: decode_record_page_v4}


def decode_record_page(b):
    if len(b) < 5 or b[:4] != b"EARC":
        raise Corrupt("not a record page (magic)")
    dec = RECORD_PAGE_DECODERS.get(b[4])
    if dec is None:
        raise Corrupt("record page version %d is unknown to this reader" % b[4])
    return dec(b)


# --- Branded ids -----------------------------------------------------------------

CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"


EPOCH_MS = 1704067200000  # 2024-01-01T00:00:00Z, the zero of a branded id


def id_text(brand, v):
    return brand + "_" + "".join(CROCKFORD[(v >> (5 * (12 - i))) & 31] for i in range(13))


def branded_to_xid(v):
    """The Redis id (ms, seq) of a branded id's 64 bits."""
    return EPOCH_MS + (v >> 22), v & ((1 << 22) - 1)


def xid_to_branded(x):
    """The 64 bits of the branded id of Redis id x, or None when it has none."""
    ms, seq = x
    off = ms - EPOCH_MS
    if 0 <= off < (1 << 42) and seq < (1 << 22):
        return off << 22 | seq
    return None


def record_id_text(x, redis_ids=False):
    """A record's id as Record JSON prints it: EVT_… when it has a branded
    id (and the stream is not a key stream), else ms-seq."""
    v = None if redis_ids else xid_to_branded(x)
    return "%d-%d" % x if v is None else id_text("EVT", v)


# --- Record JSON -------------------------------------------------------------------

_SHORT = {0x22: '\\"', 0x5C: "\\\\", 0x0A: "\\n", 0x0D: "\\r", 0x09: "\\t"}
_ESC = {c: _SHORT.get(c, "\\u%04x" % c) for c in list(range(0x20)) + [0x22, 0x5C]}
_ESC.update({0x3C: "\\u003c", 0x3E: "\\u003e", 0x26: "\\u0026", 0x2028: "\\u2028", 0x2029: "\\u2029"})
_ESC_RE = re.compile("[\x00-\x1f\"\\\\<>&\u2028\u2029]")


def _esc(m):
    return _ESC[ord(m.group())]


def _utf8_len(b, i):
    """Length of the valid UTF-8 sequence starting at b[i], or 0."""
    c = b[i]
    n = len(b)

    def cont(j, lo=0x80, hi=0xBF):
        return j < n and lo <= b[j] <= hi

    if 0xC2 <= c <= 0xDF:
        return 2 if cont(i + 1) else 0
    if c == 0xE0:
        return 3 if cont(i + 1, 0xA0) and cont(i + 2) else 0
    if 0xE1 <= c <= 0xEC or 0xEE <= c <= 0xEF:
        return 3 if cont(i + 1) and cont(i + 2) else 0
    if c == 0xED:
        return 3 if cont(i + 1, 0x80, 0x9F) and cont(i + 2) else 0
    if c == 0xF0:
        return 4 if cont(i + 1, 0x90) and cont(i + 2) and cont(i + 3) else 0
    if 0xF1 <= c <= 0xF3:
        return 4 if cont(i + 1) and cont(i + 2) and cont(i + 3) else 0
    if c == 0xF4:
        return 4 if cont(i + 1, 0x80, 0x8F) and cont(i + 2) and cont(i + 3) else 0
    return 0


def json_string(b):
    """The JSON string of the bytes b, as Record JSON's table says."""
    try:
        s = b.decode("utf-8")
    except UnicodeDecodeError:
        s = None
    if s is not None:
        return '"' + _ESC_RE.sub(_esc, s) + '"'
    out, i = [], 0
    while i < len(b):
        c = b[i]
        if c < 0x80:
            out.append(_ESC.get(c, chr(c)))
            i += 1
            continue
        n = _utf8_len(b, i)
        if n == 0:
            out.append("\\ufffd")
            i += 1
            continue
        ch = b[i:i + n].decode("utf-8")
        out.append(_ESC.get(ord(ch), ch))
        i += n
    return '"' + "".join(out) + '"'


def _is_utf8(b):
    try:
        b.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def json_bytes(b):
    """A name or value in the pair form: a JSON string if UTF-8, else
    {"b64":"…"} (standard base64, padded)."""
    if _is_utf8(b):
        return json_string(b)
    return '{"b64":"' + base64.b64encode(b).decode("ascii") + '"}'


def record_json(rid, fields, redis_ids=False):
    parts = ['{"id":"', record_id_text(rid, redis_ids), '","fields":']
    names = [k for k, _ in fields]
    plain = fields and len(set(names)) == len(names) and all(_is_utf8(k) and _is_utf8(v) for k, v in fields)
    if plain:
        parts.append("{" + ",".join(json_string(k) + ":" + json_string(v) for k, v in fields) + "}")
    else:
        parts.append("[" + ",".join("[" + json_bytes(k) + "," + json_bytes(v) + "]" for k, v in fields) + "]")
    parts.append("}\n")
    return "".join(parts).encode("utf-8")


# --- Reading an archived stream ----------------------------------------------------

def read_archive(remote, volume, reverse=False, owner=None):
    """Yields the JSON lines of the retained records of an archive volume.
    owner, when given, is the stream the volume must belong to (decode_owner's
    form): a volume whose archive.owner names another stream is refused."""
    # A stream at a Redis key (its volume archive-key.E or archive-keyh.H)
    # prints its ids as Redis ids.
    redis_ids = volume.startswith("archive-key")
    vol = Volume(remote, volume)
    vol.fold()
    got = vol.meta.get(b"archive.owner")
    if got is not None:
        got = decode_owner(got)
        if owner is not None and got != owner:
            raise Corrupt("the volume belongs to %r, not %r" % (got, owner))
    low, seq, w = archive_range(vol)
    prev = None
    recs = []
    span = None  # (rid, k, total, parts) of a record spanning pages being read
    for n in range(low, seq):
        b = vol.page(ARCHIVE_BASE + n)
        if b is None:
            raise Corrupt("archive page %d (index %d) is missing" % (n, ARCHIVE_BASE + n))
        got = decode_record_page(b)
        if len(got) == 5:
            kind, rid, k, total, part = got
            if kind == "head":
                if span is not None:
                    raise Corrupt("archive page %d: a head inside a record spanning pages" % n)
                span = (rid, k, total, [part])
                continue
            if span is None:
                if prev is None:
                    continue  # its head was dropped by retention: so is the record
                raise Corrupt("archive page %d: a continuation without its head" % n)
            srid, sk, stotal, parts = span
            if rid != srid or k != len(parts) or k > sk:
                raise Corrupt("archive page %d: continuation %d out of place" % (n, k))
            parts.append(part)
            if k < sk:
                continue
            span = None
            rid, fields = span_record(rid, stotal, parts)
        elif span is not None:
            raise Corrupt("archive page %d: inside a record spanning pages" % n)
        else:
            rid, fields = got
        if prev is not None and rid <= prev:
            raise Corrupt("archive page %d: id not above the one before it" % n)
        prev = rid
        line = record_json(rid, fields, redis_ids)
        if reverse:
            recs.append(line)
        else:
            yield line
    if span is not None:
        raise Corrupt("the last record spanning pages is cut")
    # The newest retained record is W; a volume of an older release may have
    # W above it (that release moved W past an entry it did not archive).
    if prev is not None and prev > w:
        raise Corrupt("the newest retained record is above W (archive.w)")
    for line in reversed(recs):
        yield line


def main(argv):
    args = [a for a in argv if a != "--reverse"]
    reverse = len(args) != len(argv)
    owner = None
    if len(args) == 3 and args[1] == "--volume":
        remote, volume = args[0], args[2]
    elif len(args) == 3 and args[1] == "--key":
        k = args[2]
        k = bytes.fromhex(k[4:]) if k.startswith("hex:") else os.fsencode(k)
        remote, volume, owner = args[0], key_volume(k), ("key", k)
    elif len(args) == 3:
        remote, volume, owner = args[0], "archive.%s.%s" % (args[1], args[2]), ("queue", args[1], args[2])
    else:
        sys.stderr.write(__doc__)
        return 2
    out = sys.stdout.buffer
    try:
        for line in read_archive(FileRemote(remote), volume, reverse, owner):
            out.write(line)
    except (Corrupt, OSError) as e:
        out.flush()
        sys.stderr.write("reader: %s: %s\n" % (volume, e))
        return 1
    out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
