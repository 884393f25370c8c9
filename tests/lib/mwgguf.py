#!/usr/bin/env python3
"""mwgguf: the GGUF toolkit of memwall's tests and benches (Python 3 standard
library only). Named so that it does not shadow the pip package `gguf`.

Library: read(PATH) -> Gguf (header, KVs, tensor infos; tensor data read on
demand, so multi-GB files cost their header only), write(PATH, kvs, tensors),
kv_record(), TYPE_NAMES / BLOCK (ggml types), imatrix loaders.

CLI: python3 tests/lib/mwgguf.py SUBCOMMAND ARGS [+ SUBCOMMAND ARGS ...]
('+' chains subcommands in one Python start-up; the exit status is the first
non-zero one). Subcommands (see `help`):

  types F [OUT]          "name type" per tensor, in file order (ggml names)
  shapes F [NAME=SHAPE]  "name type shape" per tensor, or those shapes checked
  kv F KEY               the value of KV KEY
  cmp A B [--label NAME] A and B equal once their memwall.* KVs are dropped
  same-data A B          the tensor data sections are equal
  memwall-bytes F        bytes of F's memwall.* KV records
  strip IN OUT           IN without its memwall.* KVs
  tensors-cmp A B        the same tensors (name, type, shape, data bytes)
  digest F [...]         JSON digest of every KV and tensor
  digest-cmp REF.json F  F against a digest
  cut-layers IN OUT N    IN without its layers blk.N..
  slim IN OUT ROWS       IN with each tensor cut to its first ROWS rows
  drop IN OUT NAME       IN without NAME's tensors (NAME.*)
  rename IN OUT OLD NEW  IN with tensor OLD named NEW
  header OUT ARCH ...    a llama-shaped GGUF (header only, or zero weights)
  active-bytes F USED    tensor bytes, and those read per token
  imatrix-dat IN OUT     a legacy .dat imatrix from a GGUF one
  imatrix-cmp A B        importance per entry (GGUF, .dat or .npz)
  imatrix-cmp-experts A B  importance and counts per expert (GGUF)
  imatrix-synth MODEL OUT  a random GGUF imatrix for MODEL's 2-D weights
  evict F                F's pages dropped from the page cache
  resident F NAME [IDS [MARGIN]]  page-cache residency of tensor NAME's rows
"""
import collections
import hashlib
import json
import random
import struct
import sys
import zipfile

# --- ggml tensor types --------------------------------------------------------

# ggml type id -> name (as memwall and llama.cpp print them)
TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0",
              9: "q8_1", 10: "q2_K", 11: "q3_K", 12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K",
              16: "iq2_xxs", 17: "iq2_xs", 18: "iq3_xxs", 19: "iq1_s", 20: "iq4_nl", 21: "iq3_s",
              22: "iq2_s", 23: "iq4_xs", 24: "i8", 25: "i16", 26: "i32", 27: "i64", 28: "f64",
              29: "iq1_m", 30: "bf16", 34: "tq1_0", 35: "tq2_0", 39: "mxfp4"}
# ggml type id -> (elements per block, bytes per block)
BLOCK = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24), 8: (32, 34),
         9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144), 13: (256, 176),
         14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74), 18: (256, 98),
         19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82), 23: (256, 136),
         24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8), 29: (256, 56),
         30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17)}
F32, F16, BF16 = 0, 1, 30

# --- GGUF value types ---------------------------------------------------------

KV_NAMES = {0: "UINT8", 1: "INT8", 2: "UINT16", 3: "INT16", 4: "UINT32", 5: "INT32",
            6: "FLOAT32", 7: "BOOL", 8: "STRING", 9: "ARRAY", 10: "UINT64", 11: "INT64",
            12: "FLOAT64"}
UINT32, FLOAT32, STRING, ARRAY = 4, 6, 8, 9
SCALAR = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q",
          11: "<q", 12: "<d"}
ALIGN = 32


def nelements(ne):
    n = 1
    for x in ne:
        n *= x
    return n


def tensor_nbytes(ne, ty):
    """Bytes of a tensor of shape NE and ggml type TY; None for a type not in BLOCK."""
    if ty not in BLOCK:
        return None
    be, bb = BLOCK[ty]
    return nelements(ne) // be * bb


def pad(n, align=ALIGN):
    return (-n) % align


def _bytes(s):
    return s.encode("utf-8", "surrogateescape") if isinstance(s, str) else bytes(s)


def _str(b):
    return b.decode("utf-8", "surrogateescape")


# --- reading ------------------------------------------------------------------

# key: str; type: GGUF value type; value: decoded (str, int, float, bool, or
# (element type, [values]) for an array); raw: the whole record (key, type,
# value) as in the file; vstart: where the value starts in raw
KV = collections.namedtuple("KV", "key type value raw vstart")
# name: str; ne: [int]; type: ggml type; offset: from the data start; raw:
# the tensor info record as in the file
TensorInfo = collections.namedtuple("TensorInfo", "name ne type offset raw")


class _Short(Exception):
    """The header runs past the bytes read so far."""


class _Cursor:
    def __init__(self, data):
        self.d, self.o = data, 0

    def take(self, fmt):
        n = struct.calcsize(fmt)
        if self.o + n > len(self.d):
            raise _Short()
        v = struct.unpack_from(fmt, self.d, self.o)[0]
        self.o += n
        return v

    def raw_str(self):
        n = self.take("<Q")
        if self.o + n > len(self.d):
            raise _Short()
        b = bytes(self.d[self.o:self.o + n])
        self.o += n
        return b

    def value(self, t):
        if t == STRING:
            return _str(self.raw_str())
        if t == ARRAY:
            et, n = self.take("<I"), self.take("<Q")
            # scalar and string arrays in one pass each (the same values as
            # element by element, at half the CPU for a 262k-token vocabulary)
            if et in SCALAR:
                if self.o + n * struct.calcsize(SCALAR[et]) > len(self.d):
                    raise _Short()
                f = struct.Struct("<%d%s" % (n, SCALAR[et][1:]))
                v = list(f.unpack_from(self.d, self.o))
                self.o += f.size
                return (et, v)
            if et == STRING:
                d, o, end, u64, v = self.d, self.o, len(self.d), struct.Struct("<Q").unpack_from, []
                for _ in range(n):
                    if o + 8 > end:
                        raise _Short()
                    m = u64(d, o)[0]
                    o += 8
                    if o + m > end:
                        raise _Short()
                    v.append(_str(bytes(d[o:o + m])))
                    o += m
                self.o = o
                return (et, v)
            return (et, [self.value(et) for _ in range(n)])
        if t not in SCALAR:
            raise ValueError("unknown GGUF value type %d" % t)
        return self.take(SCALAR[t])


class Gguf:
    """A GGUF file's header: version, kvs [KV], tensors [TensorInfo],
    alignment, data_start, size; tensor data is read on demand."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            want = 1 << 24  # a 262k-token vocabulary's header fits: parsed once
            while True:
                f.seek(0)
                head = f.read(want)
                try:
                    self._parse(head)
                    break
                except _Short:
                    if len(head) < want:
                        raise ValueError("%s: truncated GGUF header" % path)
                    want *= 4
            f.seek(0, 2)
            self.size = f.tell()
        self.head = head[:self.data_start]
        self._by_name = {t.name: t for t in self.tensors}
        offs = sorted(set(t.offset for t in self.tensors)) + [self.size - self.data_start]
        self._next = {o: offs[i + 1] for i, o in enumerate(offs[:-1])}

    def _parse(self, d):
        c = _Cursor(d)
        if bytes(d[:4]) != b"GGUF":
            if len(d) < 4:
                raise _Short()
            raise ValueError("%s: not a GGUF file" % self.path)
        c.o = 4
        self.version = c.take("<I")
        nt, nkv = c.take("<Q"), c.take("<Q")
        self.alignment = ALIGN
        self.kvs = []
        for _ in range(nkv):
            s = c.o
            key = _str(c.raw_str())
            t = c.take("<I")
            vs = c.o - s
            v = c.value(t)
            if key == "general.alignment" and t == UINT32:
                self.alignment = v
            self.kvs.append(KV(key, t, v, bytes(d[s:c.o]), vs))
        self.tensors = []
        for _ in range(nt):
            s = c.o
            name = _str(c.raw_str())
            nd = c.take("<I")
            ne = [c.take("<Q") for _ in range(nd)]
            ty = c.take("<I")
            off = c.take("<Q")
            self.tensors.append(TensorInfo(name, ne, ty, off, bytes(d[s:c.o])))
        self.info_end = c.o
        self.data_start = c.o + pad(c.o, self.alignment)

    def kv(self, key, default=None):
        for e in self.kvs:
            if e.key == key:
                return e.value
        return default

    def tensor(self, name):
        return self._by_name.get(name)

    def nbytes(self, t):
        """T's data bytes by its type; without padding up to the next tensor."""
        n = tensor_nbytes(t.ne, t.type)
        if n is None:
            raise ValueError("%s: tensor %s: ggml type %d unknown here" % (self.path, t.name, t.type))
        return n

    def span(self, t):
        """Bytes from T's offset to the next tensor's (or the end of the file)."""
        return self._next[t.offset] - t.offset

    def read(self, t, span=False, start=0, n=None):
        """T's data (span: up to the next tensor), or N bytes of it from START."""
        if n is None:
            n = (self.span(t) if span else self.nbytes(t)) - start
        with open(self.path, "rb") as f:
            f.seek(self.data_start + t.offset + start)
            return f.read(n)

    def values(self, t):
        """T's elements as floats (f32, f16, bf16)."""
        b = self.read(t)
        n = nelements(t.ne)
        if t.type == F32:
            return struct.unpack("<%df" % n, b)
        if t.type == F16:
            return struct.unpack("<%de" % n, b)
        if t.type == BF16:
            return tuple(struct.unpack("<f", b"\0\0" + b[2 * i:2 * i + 2])[0] for i in range(n))
        raise ValueError("%s: tensor %s: cannot read type %s as floats"
                         % (self.path, t.name, TYPE_NAMES.get(t.type, t.type)))

    def data(self):
        """The whole data section (from data_start to the end of the file)."""
        with open(self.path, "rb") as f:
            f.seek(self.data_start)
            return f.read()


def read(path):
    return Gguf(path)


# --- writing ------------------------------------------------------------------

def gstr(s):
    s = _bytes(s)
    return struct.pack("<Q", len(s)) + s


def _value(t, v):
    if t == STRING:
        return gstr(v)
    if t == ARRAY:
        et, vals = v
        return struct.pack("<IQ", et, len(vals)) + b"".join(_value(et, x) for x in vals)
    return struct.pack(SCALAR[t], v)


def kv_record(key, t, value):
    """One KV record: KEY (str or bytes), GGUF value type T, VALUE ((element
    type, [values]) for an array)."""
    return gstr(key) + struct.pack("<I", t) + _value(t, value)


def tensor_record(name, ne, ty, offset):
    return (gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", x) for x in ne)
            + struct.pack("<IQ", ty, offset))


def write(path, kvs, tensors, version=3, alignment=ALIGN, with_data=True):
    """Write a GGUF file: encode()'s bytes."""
    with open(path, "wb") as f:
        f.write(encode(kvs, tensors, version, alignment, with_data))


def encode(kvs, tensors, version=3, alignment=ALIGN, with_data=True):
    """A GGUF file's bytes. KVS: KV tuples (their raw records are written),
    (key, type, value) triples or raw record bytes. TENSORS: (name, ne, type,
    data) with data bytes, or None for zeros of the type's size; each tensor's
    data is padded to ALIGNMENT. with_data=False: the header only (the offsets
    still count the data)."""
    recs = []
    for kv in kvs:
        if isinstance(kv, KV):
            recs.append(kv.raw)
        elif isinstance(kv, (bytes, bytearray)):
            recs.append(bytes(kv))
        else:
            recs.append(kv_record(*kv))
    h = [b"GGUF", struct.pack("<IQQ", version, len(tensors), len(recs))] + recs
    off = 0
    blobs = []
    for name, ne, ty, data in tensors:
        n = len(data) if data is not None else tensor_nbytes(ne, ty)
        h.append(tensor_record(name, ne, ty, off))
        if with_data:
            blobs.append(data if data is not None else b"\0" * n)
            blobs.append(b"\0" * pad(n, alignment))
        off += n + pad(n, alignment)
    hb = b"".join(h)
    return b"".join([hb, b"\0" * pad(len(hb), alignment)] + blobs)


# --- memwall.* keys -----------------------------------------------------------

def is_memwall(kv):
    return kv.key.startswith("memwall.")


def stripped(g):
    """G's bytes without its memwall.* KVs: what llama.cpp's quantizer writes."""
    keep = [kv for kv in g.kvs if not is_memwall(kv)]
    h = (b"GGUF" + struct.pack("<IQQ", g.version, len(g.tensors), len(keep))
         + b"".join(kv.raw for kv in keep) + b"".join(t.raw for t in g.tensors))
    return h + b"\0" * pad(len(h), g.alignment) + g.data()


def memwall_bytes(g):
    return sum(len(kv.raw) for kv in g.kvs if is_memwall(kv))


def cmd_cmp(*args):
    """cmp A B [--label NAME]: A and B equal byte for byte once the memwall.*
    KVs are dropped from both. Prints "identical BYTES", else what differs
    (exit 1). --label: one report line, exit 0 either way: "NAME bytes(A)
    bytes(B) bytes(A's memwall.* KVs) identical N" or "NAME ... differs: WHAT"."""
    args = list(args)
    label = None
    if "--label" in args:
        i = args.index("--label")
        label = args[i + 1]
        del args[i:i + 2]
    a, b = read(args[0]), read(args[1])
    sa, sb = stripped(a), stripped(b)
    if label is not None:
        head = "%s %d %d %d" % (label, a.size, b.size, memwall_bytes(a))
        if sa == sb:
            print(head, "identical", len(sa))
            return 0
        why = []
        if ([kv.raw for kv in a.kvs if not is_memwall(kv)]
                != [kv.raw for kv in b.kvs if not is_memwall(kv)]):
            why.append("KVs")
        for x, y in zip(a.tensors, b.tensors):
            if x[:3] != y[:3]:
                why.append("info of %s" % x.name)
            elif a.read(x, span=True) != b.read(y, span=True):
                why.append("data of %s" % x.name)
        print(head, "differs:", ", ".join(why[:4]) + (" ..." if len(why) > 4 else ""))
        return 0
    if sa == sb:
        print("identical", len(sa))
        return 0
    ka = [kv for kv in a.kvs if not is_memwall(kv)]
    kb = [kv for kv in b.kvs if not is_memwall(kv)]
    if [k.key for k in ka] != [k.key for k in kb]:
        print("KV names differ:", [k.key for k in ka], [k.key for k in kb])
    else:
        for x, y in zip(ka, kb):
            if x.raw != y.raw:
                print("KV %s differs" % x.key)
    for x, y in zip(a.tensors, b.tensors):
        if x[:3] != y[:3]:
            print("tensor info differs:", x[:3], y[:3])
    print("tensor data identical" if a.data() == b.data() else "tensor data differs")
    return 1


def cmd_same_data(a, b):
    """same-data A B: exit 0 when the tensor data sections are equal, else 1."""
    return 0 if read(a).data() == read(b).data() else 1


def cmd_memwall_bytes(f):
    """memwall-bytes F: the bytes F's memwall.* KV records take."""
    print(memwall_bytes(read(f)))
    return 0


def cmd_strip(src, out):
    """strip IN OUT: IN without its memwall.* KVs (tensor infos and data as they are)."""
    with open(out, "wb") as f:
        f.write(stripped(read(src)))
    return 0


# --- listing ------------------------------------------------------------------

def cmd_types(path, out=None):
    """types F [OUT]: "name type" per tensor of F, in file order (ggml type
    names), on stdout or into OUT."""
    lines = ["%s %s\n" % (t.name, TYPE_NAMES.get(t.type, str(t.type))) for t in read(path).tensors]
    if out is None:
        sys.stdout.write("".join(lines))
    else:
        with open(out, "w") as f:
            f.write("".join(lines))
    return 0


def cmd_kv(path, key):
    """kv F KEY: the value of KV KEY (exit 1 when F has none)."""
    g = read(path)
    for kv in g.kvs:
        if kv.key == key:
            v = kv.value
            print(json.dumps(v[1]) if kv.type == ARRAY else v)
            return 0
    return 1


def cmd_shapes(path, *want):
    """shapes F [NAME=D0xD1x...]...: "name type D0xD1x..." per tensor of F;
    with NAME=SHAPE arguments, those tensors' shapes checked instead: one
    line per tensor missing or of another shape, exit 1 when there is any."""
    g = read(path)
    if not want:
        for t in g.tensors:
            print(t.name, TYPE_NAMES.get(t.type, str(t.type)), "x".join(map(str, t.ne)))
        return 0
    bad = 0
    for w in want:
        name, shape = w.rsplit("=", 1)
        t = g.tensor(name)
        got = "x".join(map(str, t.ne)) if t else "missing"
        if got != shape:
            print("%s: %s, want %s" % (name, got, shape))
            bad = 1
    return bad


# --- comparing tensors --------------------------------------------------------

def cmd_tensors_cmp(*argv):
    """tensors-cmp A B: every tensor of A is in B with the same type, shape
    and data bytes, and vice versa (KVs and tensor order ignored). Prints
    "identical N of N" or "differ K of N" and the first 20 differences; exit
    0 when identical, 1 when not, 2 on a file it cannot read."""
    if len(argv) != 2:
        sys.stderr.write(cmd_tensors_cmp.__doc__ + "\n")
        return 2
    try:
        ga, gb = read(argv[0]), read(argv[1])
        ta = {t.name: t for t in ga.tensors}
        tb = {t.name: t for t in gb.tensors}
        for g, ts in ((ga, ta), (gb, tb)):
            for t in ts.values():
                g.nbytes(t)
        bad = []
        for name in sorted(set(ta) | set(tb)):
            if name not in ta or name not in tb:
                bad.append("%s: only in %s" % (name, argv[0] if name in ta else argv[1]))
                continue
            x, y = ta[name], tb[name]
            if (x.type, x.ne) != (y.type, y.ne):
                bad.append("%s: type/shape %s vs %s" % (name, (x.type, x.ne), (y.type, y.ne)))
                continue
            n = ga.nbytes(x)
            nd = 0
            step = 16 << 20
            for s in range(0, n, step):
                k = min(step, n - s)
                p, q = ga.read(x, start=s, n=k), gb.read(y, start=s, n=k)
                if len(p) != k or len(q) != k:
                    raise ValueError("%s: data truncated" % name)
                if p != q:
                    nd += sum(1 for i in range(k) if p[i] != q[i])
            if nd:
                bad.append("%s: %d of %d bytes differ" % (name, nd, n))
    except (OSError, ValueError, struct.error) as e:
        sys.stderr.write("tensors-cmp: %s\n" % e)
        return 2
    if bad:
        print("differ %d of %d" % (len(bad), len(set(ta) | set(tb))))
        for line in bad[:20]:
            print("  " + line)
        return 1
    print("identical %d of %d" % (len(ta), len(ta)))
    return 0


# --- digest -------------------------------------------------------------------

def _fmt_scalar(t, v):
    if t in (6, 12):
        return repr(float(v))
    if t == 7:
        return bool(v)
    return v


def digest(path):
    """{"version", "kvs": [{"key", "type", "value"} or {"key", "type", "n",
    "sha256"} for arrays of more than 16 elements], "tensors": [{"name",
    "type", "shape", "sha256"}]}, in file order. Floats as the repr of the
    stored value; an array's sha256 is of its elements' little-endian bytes
    (strings: u64 length + bytes each), a tensor's of its data bytes."""
    g = read(path)
    kvs = []
    for kv in g.kvs:
        if kv.type == STRING:
            kvs.append({"key": kv.key, "type": "STRING", "value": kv.value})
        elif kv.type == ARRAY:
            et, vals = kv.value
            e = {"key": kv.key, "type": "ARRAY[%s]" % KV_NAMES[et]}
            if len(vals) > 16:
                e.update({"n": len(vals),
                          "sha256": hashlib.sha256(kv.raw[kv.vstart + 12:]).hexdigest()})
            elif et == STRING:
                e["value"] = [_bytes(v).decode("utf-8", errors="replace") for v in vals]
            else:
                e["value"] = [_fmt_scalar(et, v) for v in vals]
            kvs.append(e)
        else:
            kvs.append({"key": kv.key, "type": KV_NAMES[kv.type], "value": _fmt_scalar(kv.type, kv.value)})
    tensors = [{"name": t.name, "type": t.type, "shape": t.ne,
                "sha256": hashlib.sha256(g.read(t)).hexdigest()} for t in g.tensors]
    return {"version": g.version, "kvs": kvs, "tensors": tensors}


def cmd_digest(*args):
    """digest F [--indent N] [--source COMMIT FIXTURE]: F's JSON digest on
    stdout (indent 1). --source: with a "source" entry naming llama.cpp's
    converter at COMMIT and the fixture (tests/fixtures/mk_family_fixture.py
    FIXTURE), as the references of tests/fixtures/llamacpp_ref are written."""
    args = list(args)
    indent = 1
    source = None
    if "--indent" in args:
        i = args.index("--indent")
        indent = int(args[i + 1])
        del args[i:i + 2]
    if "--source" in args:
        i = args.index("--source")
        source = {"converter": "llama.cpp convert_hf_to_gguf.py", "commit": args[i + 1],
                  "fixture": "tests/fixtures/mk_family_fixture.py " + args[i + 2].strip()}
        del args[i:i + 3]
    d = digest(args[0])
    if source is not None:
        d["source"] = source
    json.dump(d, sys.stdout, indent=indent, ensure_ascii=False)
    sys.stdout.write("\n")
    return 0


def _ignored(key, pats):
    return any((p.endswith("*") and key.startswith(p[:-1])) or key == p for p in pats)


def digest_compare(ref, got, pats, tensors_only):
    bad = []
    rt, gt = ref["tensors"], got["tensors"]
    if [t["name"] for t in rt] != [t["name"] for t in gt]:
        rn, gn = [t["name"] for t in rt], [t["name"] for t in gt]
        bad.append("tensor set/order differs: only in reference %s, only in file %s%s" % (
            sorted(set(rn) - set(gn))[:8], sorted(set(gn) - set(rn))[:8],
            "" if set(rn) != set(gn) else " (same set, other order)"))
    gmap = {t["name"]: t for t in gt}
    for t in rt:
        g = gmap.get(t["name"])
        if not g:
            continue
        for f in ("type", "shape", "sha256"):
            if t[f] != g[f]:
                bad.append("tensor %s: %s %s, reference %s" % (t["name"], f, g[f], t[f]))
    if not tensors_only:
        rk = {k["key"]: k for k in ref["kvs"] if not _ignored(k["key"], pats)}
        gk = {k["key"]: k for k in got["kvs"] if not _ignored(k["key"], pats)}
        ro = [k for k in rk if k in gk]
        go = [k for k in gk if k in rk]
        if ro != go:
            i = next(i for i in range(len(ro)) if ro[i] != go[i])
            bad.append("kv order differs at the %d-th common key: file %s, reference %s" % (
                i, go[i], ro[i]))
        for k in sorted(set(rk) | set(gk)):
            if k not in gk:
                bad.append("kv %s: missing (reference %s)" % (k, json.dumps(rk[k])[:200]))
            elif k not in rk:
                bad.append("kv %s: not in reference (file %s)" % (k, json.dumps(gk[k])[:200]))
            elif rk[k] != gk[k]:
                bad.append("kv %s: file %s, reference %s" % (k, json.dumps(gk[k])[:200],
                                                            json.dumps(rk[k])[:200]))
    return bad


def cmd_digest_cmp(*args):
    """digest-cmp REF.json F [--ignore-kv KEY]... [--tensors-only]: F against
    a digest (every tensor: order, name, type, shape, bytes; every KV: key,
    type, value, and the order of the keys both have), but the keys given
    with --ignore-kv (exact names, or a prefix ending in '*'). One line per
    difference; exit 1 when there is any, 0 when none."""
    if len(args) < 2:
        sys.stderr.write(cmd_digest_cmp.__doc__ + "\n")
        return 2
    ref_path, path, rest = args[0], args[1], args[2:]
    pats, tensors_only = [], False
    i = 0
    while i < len(rest):
        if rest[i] == "--ignore-kv" and i + 1 < len(rest):
            pats.append(rest[i + 1])
            i += 2
        elif rest[i] == "--tensors-only":
            tensors_only = True
            i += 1
        else:
            sys.stderr.write(cmd_digest_cmp.__doc__ + "\n")
            return 2
    with open(ref_path, encoding="utf-8") as f:
        ref = json.load(f)
    bad = digest_compare(ref, digest(path), pats, tensors_only)
    for b in bad:
        print(b)
    return 1 if bad else 0


# --- rewriting ----------------------------------------------------------------

def cmd_cut_layers(src, out, keep):
    """cut-layers IN OUT N: IN without its layers blk.N.. (a model: its
    *.block_count set to N; an imatrix: the entries of those layers dropped).
    KVs, the other tensor infos and data are IN's."""
    keep = int(keep)
    g = read(src)
    kvs = [(kv.key, UINT32, keep) if kv.key.endswith(".block_count") else kv for kv in g.kvs]

    def layer(n):
        return int(n.split(".")[1]) if n.startswith("blk.") else -1
    write(out, kvs, [(t.name, t.ne, t.type, g.read(t, span=True)) for t in g.tensors
                     if layer(t.name) < keep], g.version, g.alignment)
    return 0


def cmd_slim(src, out, rows):
    """slim IN OUT ROWS: IN with every tensor cut to its first ROWS rows (per
    expert of a stacked tensor); KVs, names and row lengths kept."""
    rows = int(rows)
    g = read(src)
    d = g.data()
    ts = []
    for t in g.tensors:
        row = g.nbytes(t) // nelements(t.ne[1:])
        o = t.offset
        if len(t.ne) == 1:
            ts.append((t.name, t.ne, t.type, d[o:o + row]))
            continue
        keep = min(t.ne[1], rows)
        n_mat = nelements(t.ne[2:])
        b = b"".join(d[o + k * t.ne[1] * row:o + (k * t.ne[1] + keep) * row] for k in range(n_mat))
        ts.append((t.name, [t.ne[0], keep] + t.ne[2:], t.type, b))
    write(out, g.kvs, ts, g.version, g.alignment)
    return 0


def cmd_drop(src, out, name):
    """drop IN OUT NAME: IN (an imatrix) without NAME's tensors (NAME.*)."""
    g = read(src)
    pre = name + "."
    write(out, g.kvs, [(t.name, t.ne, t.type, g.read(t, span=True)) for t in g.tensors
                       if not t.name.startswith(pre)], g.version, g.alignment)
    return 0


def cmd_rename(src, out, old, new):
    """rename IN OUT OLD NEW: IN with its tensor OLD named NEW (bytes of NEW
    as given: escapes and control bytes welcome)."""
    g = read(src)
    if g.tensor(old) is None:
        sys.stderr.write("rename: %s: no tensor %s\n" % (src, old))
        return 1
    write(out, g.kvs, [(new if t.name == old else t.name, t.ne, t.type, g.read(t, span=True))
                       for t in g.tensors], g.version, g.alignment)
    return 0


# --- synthetic models ---------------------------------------------------------

def cmd_header(out, arch, embd, ff, nl, nh, nkv, vocab, tied, nx="0", rows=None):
    """header OUT ARCH EMBD FF LAYERS HEADS KV_HEADS VOCAB TIED [EXPERTS [ROWS]]:
    a llama-shaped F16 GGUF with F32 norms: the header only, or with ROWS
    given zero weights of at most ROWS rows per tensor. EXPERTS > 0: stacked
    ffn_*_exps and an F32 router ffn_gate_inp."""
    embd, ff, nl, nh, nkv, vocab, tied, nx = map(int, (embd, ff, nl, nh, nkv, vocab, tied, nx))
    kvd = embd // nh * nkv
    kv = [("general.architecture", STRING, arch)]
    keys = [("block_count", nl), ("context_length", 4096), ("embedding_length", embd),
            ("feed_forward_length", ff), ("attention.head_count", nh),
            ("attention.head_count_kv", nkv), ("vocab_size", vocab)]
    if nx:
        keys += [("expert_count", nx), ("expert_used_count", 2)]
    kv += [("%s.%s" % (arch, k), UINT32, v) for k, v in keys]
    kv += [("%s.attention.%s" % (arch, k), FLOAT32, 1e-5)
           for k in ("layer_norm_rms_epsilon", "layer_norm_epsilon")]
    kv.append(("general.file_type", UINT32, 1))
    t = [("token_embd.weight", [embd, vocab], F16), ("output_norm.weight", [embd], F32)]
    if not tied:
        t.append(("output.weight", [embd, vocab], F16))
    for layer in range(nl):
        p = "blk.%d." % layer
        t += [(p + "attn_norm.weight", [embd], F32), (p + "attn_q.weight", [embd, embd], F16),
              (p + "attn_k.weight", [embd, kvd], F16), (p + "attn_v.weight", [embd, kvd], F16),
              (p + "attn_output.weight", [embd, embd], F16), (p + "ffn_norm.weight", [embd], F32)]
        if nx:
            t += [(p + "ffn_gate_inp.weight", [embd, nx], F32),
                  (p + "ffn_gate_exps.weight", [embd, ff, nx], F16),
                  (p + "ffn_up_exps.weight", [embd, ff, nx], F16),
                  (p + "ffn_down_exps.weight", [ff, embd, nx], F16)]
        else:
            t += [(p + "ffn_gate.weight", [embd, ff], F16), (p + "ffn_up.weight", [embd, ff], F16),
                  (p + "ffn_down.weight", [ff, embd], F16)]
    if rows is not None:
        t = [(n, ne if len(ne) == 1 else [ne[0], min(ne[1], int(rows))] + ne[2:], ty)
             for n, ne, ty in t]
    write(out, kv, [(n, ne, ty, None) for n, ne, ty in t], with_data=rows is not None)
    return 0


def cmd_active_bytes(path, used):
    """active-bytes F USED: "TOTAL ACTIVE": the bytes of every tensor, and
    those a token reads: USED slabs of each stacked *_exps tensor, one row of
    token_embd when the output matrix is separate (untied), one row of
    gemma4's per_layer_token_embd, none of the K/V tensors of its layers that
    read an earlier layer's cache."""
    used = int(used)
    g = read(path)
    names = set(t.name for t in g.tensors)
    n_layer = g.kv("gemma4.block_count") or 0
    shared = g.kv("gemma4.attention.shared_kv_layers") or 0
    unread = set("blk.%d.%s" % (i, s) for i in range(n_layer - shared, n_layer)
                 for s in ("attn_k.weight", "attn_v.weight", "attn_k_norm.weight"))
    tot = act = 0
    for t in g.tensors:
        ne = t.ne + [1] * (4 - len(t.ne))
        b = g.nbytes(t)
        tot += b
        if "_exps." in t.name:
            b = b // ne[2] * used
        elif t.name == "token_embd.weight" and "output.weight" in names:
            b = b // ne[1]
        elif t.name == "per_layer_token_embd.weight":
            b = b // ne[1]
        elif t.name in unread:
            b = 0
        act += b
    print(tot, act)
    return 0


# --- importance matrices ------------------------------------------------------

def imatrix_entries(path):
    """A GGUF imatrix (llama-imatrix's layout: an F32 "W.in_sum2" {ne0, n_mat}
    and an F32 "W.counts" {1, n_mat} per weight W) -> ({W: (in_sum2 shape,
    counts shape, sums, counts)}, the Gguf)."""
    g = read(path)
    ent = {}
    for t in g.tensors:
        if not t.name.endswith(".in_sum2"):
            continue
        w = t.name[:-len(".in_sum2")]
        c = g.tensor(w + ".counts")
        if c is None:
            raise ValueError("%s: %s has no %s.counts" % (path, t.name, w))
        if t.type != F32 or c.type != F32:
            raise ValueError("%s: %s: types %d/%d, expected F32" % (path, w, t.type, c.type))
        n_mat = nelements(t.ne[1:])
        if c.ne[0] != 1 or nelements(c.ne) != n_mat:
            raise ValueError("%s: %s: counts shape %s does not match in_sum2 %s"
                             % (path, w, c.ne, t.ne))
        ent[w] = (list(t.ne), list(c.ne), g.values(t), g.values(c))
    for t in g.tensors:
        if t.name.endswith(".counts") and t.name[:-len(".counts")] not in ent:
            raise ValueError("%s: %s has no .in_sum2" % (path, t.name))
    return ent, g


def _imatrix_gguf(path):
    ent, _ = imatrix_entries(path)
    vals, counts = {}, {}
    for w, (ne, _, v, cs) in ent.items():
        ne0 = ne[0]
        vals[w] = [x / cs[i // ne0] if cs[i // ne0] else 1.0 for i, x in enumerate(v)]
        counts[w] = sum(cs)
    return vals, counts


def _imatrix_dat(path):
    d = open(path, "rb").read()
    n = struct.unpack_from("<i", d, 0)[0]
    p = 4
    vals, counts = {}, {}
    for _ in range(n):
        ln = struct.unpack_from("<i", d, p)[0]
        nm = d[p + 4:p + 4 + ln].decode()
        p += 4 + ln
        ncall, nval = struct.unpack_from("<ii", d, p)
        p += 8
        v = struct.unpack_from("<%df" % nval, d, p)
        p += 4 * nval
        vals[nm] = [x / ncall if ncall > 0 else x for x in v]
        counts[nm] = ncall
    return vals, counts


HF2GGUF = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
           "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
           "mlp.down_proj": "ffn_down"}


def _hf_to_gguf(name):
    # model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight
    p = name.split(".")
    if p[0] == "model" and p[1] == "layers":
        mod = ".".join(p[3:5])
        if mod in HF2GGUF:
            return "blk.%s.%s.weight" % (p[2], HF2GGUF[mod])
    return name


def _read_npy(data):
    if data[:6] != b"\x93NUMPY":
        raise ValueError("not a .npy")
    if data[6] == 1:
        hl, off = struct.unpack_from("<H", data, 8)[0], 10
    else:
        hl, off = struct.unpack_from("<I", data, 8)[0], 12
    header = data[off:off + hl].decode("latin1")
    d = eval(header, {"__builtins__": {}}, {"False": False, "True": True})  # a dict literal
    fmt = {"<f8": "d", "<f4": "f", "<i8": "q", "<i4": "i", "<u8": "Q"}[d["descr"]]
    return list(struct.unpack_from("<%d%s" % (nelements(d["shape"]), fmt), data, off + hl))


def _imatrix_npz(path):
    z = zipfile.ZipFile(path)
    sums, counts = {}, {}
    for nm in z.namelist():
        key = nm[:-4] if nm.endswith(".npy") else nm
        arr = _read_npy(z.read(nm))
        if key.endswith(".in_sum2"):
            sums[_hf_to_gguf(key[:-8])] = arr
        elif key.endswith(".counts"):
            counts[_hf_to_gguf(key[:-7])] = arr
    return {k: [v / counts[k][0] for v in sums[k]] for k in sums}, {k: counts[k][0] for k in counts}


def imatrix_importance(path):
    """The importance per input column of each entry, and its count: a GGUF
    imatrix (in_sum2 / counts per expert, 1.0 where counts is 0; count: the
    summed counts), a legacy .dat (values / ncall; ncall), or the reference
    .npz (numpy zip of float64 "<hf>.in_sum2" / "<hf>.counts" keyed by HF
    weight names)."""
    with open(path, "rb") as f:
        head = f.read(4)
    if head == b"GGUF":
        return _imatrix_gguf(path)
    if head[:2] == b"PK":
        return _imatrix_npz(path)
    return _imatrix_dat(path)


def _opts(args, names):
    """(files, {option: float}) from ARGS with the float options NAMES."""
    files, got = [], dict.fromkeys(names)
    i = 0
    while i < len(args):
        if args[i] in names and i + 1 < len(args):
            got[args[i]] = float(args[i + 1])
            i += 2
        elif args[i].startswith("-"):
            raise ValueError("unknown option %s" % args[i])
        else:
            files.append(args[i])
            i += 1
    return files, got


def cmd_imatrix_cmp(*args):
    """imatrix-cmp OURS REF [--max-rel TOL] [--mean-rel TOL]: the importance
    of each entry (GGUF, .dat or .npz), relative error |a - b| / |b| per
    value. Prints entries, values, the first entry's counts, max (with the
    worst value) and mean relative error; exit 1 when the entry sets or
    lengths differ or a tolerance is exceeded."""
    (fa, fb), tol = _opts(list(args), ("--max-rel", "--mean-rel"))
    a, ca = imatrix_importance(fa)
    b, cb = imatrix_importance(fb)
    if set(a) != set(b):
        print("entry sets differ: only in first %s, only in second %s"
              % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
        return 1
    worst = (0.0, None, None)
    tot = 0.0
    n = 0
    for k in sorted(a):
        if len(a[k]) != len(b[k]):
            print("%s: %d vs %d values" % (k, len(a[k]), len(b[k])))
            return 1
        for j, (x, y) in enumerate(zip(a[k], b[k])):
            r = abs(x - y) / max(abs(y), 1e-30)
            tot += r
            n += 1
            if r > worst[0]:
                worst = (r, k, j)
    mean = tot / max(n, 1)
    k0 = sorted(a)[0]
    print("entries %d, values %d; counts %s vs %s; max rel %.3e (%s[%s]), mean rel %.3e"
          % (len(a), n, ca[k0], cb[k0], worst[0], worst[1], worst[2], mean))
    bad = ((tol["--max-rel"] is not None and worst[0] > tol["--max-rel"])
           or (tol["--mean-rel"] is not None and mean > tol["--mean-rel"]))
    return 1 if bad else 0


def _slice_importance(sums, counts, ne0, j):
    c = counts[j]
    if c > 0:
        return [s / c for s in sums[j * ne0:(j + 1) * ne0]]
    return [1.0] * ne0


def cmd_imatrix_cmp_experts(*args):
    """imatrix-cmp-experts A B [--max-rel X] [--mean-rel Y] [--counts-rel Z]:
    two GGUF imatrices entry by entry, expert by expert (B the reference):
    the same entries and shapes; per expert slice the importance
    llama-quantize derives (in_sum2 / counts, 1.0 where counts is 0),
    relative error |a - b| / max(|b|, 1e-30); counts |ca - cb| / max(cb, 1).
    One summary line; exit 0 when every bound given holds, 1 when not, 2 on
    usage or a file it cannot read."""
    try:
        files, bounds = _opts(list(args), ("--max-rel", "--mean-rel", "--counts-rel"))
    except ValueError as e:
        sys.stderr.write("imatrix-cmp-experts: %s\n" % e)
        return 2
    if len(files) != 2:
        sys.stderr.write(cmd_imatrix_cmp_experts.__doc__ + "\n")
        return 2
    try:
        side = []
        for f in files:
            ent, g = imatrix_entries(f)
            side.append((ent, "chunks %s x %s" % (g.kv("imatrix.chunk_count"), g.kv("imatrix.chunk_size"))))
    except (OSError, ValueError, KeyError, struct.error) as e:
        sys.stderr.write("imatrix-cmp-experts: %s\n" % e)
        return 2
    (a, kva), (b, kvb) = side
    if set(a) != set(b):
        print("FAIL entry sets differ: only in A %s, only in B %s"
              % (sorted(set(a) - set(b))[:5], sorted(set(b) - set(a))[:5]))
        return 1
    for w in sorted(a):
        if a[w][:2] != b[w][:2]:
            print("FAIL %s: shapes in_sum2 %s counts %s vs in_sum2 %s counts %s"
                  % (w, a[w][0], a[w][1], b[w][0], b[w][1]))
            return 1
    worst = (-1.0, "", 0, 0)
    cworst = (-1.0, "", 0)
    tot = 0.0
    nval = nslice = 0
    zero_a = zero_b = 0
    ca_sum = cb_sum = 0.0
    for w in sorted(a):
        ne, _, sa, na = a[w]
        _, _, sb, nb = b[w]
        ne0 = ne[0]
        for j in range(len(na)):
            nslice += 1
            ca_sum += na[j]
            cb_sum += nb[j]
            zero_a += na[j] == 0
            zero_b += nb[j] == 0
            cr = abs(na[j] - nb[j]) / max(nb[j], 1.0)
            if cr > cworst[0]:
                cworst = (cr, w, j)
            for k, (x, y) in enumerate(zip(_slice_importance(sa, na, ne0, j),
                                           _slice_importance(sb, nb, ne0, j))):
                r = abs(x - y) / max(abs(y), 1e-30)
                tot += r
                nval += 1
                if r > worst[0]:
                    worst = (r, w, j, k)
    mean = tot / max(nval, 1)
    bad = []
    if bounds["--max-rel"] is not None and worst[0] > bounds["--max-rel"]:
        bad.append("max rel > %g" % bounds["--max-rel"])
    if bounds["--mean-rel"] is not None and mean > bounds["--mean-rel"]:
        bad.append("mean rel > %g" % bounds["--mean-rel"])
    if bounds["--counts-rel"] is not None and cworst[0] > bounds["--counts-rel"]:
        bad.append("counts rel > %g" % bounds["--counts-rel"])
    print("%s entries %d, slices %d, values %d; max rel %.3e (%s[expert %d][col %d]), mean rel %.3e; "
          "counts max rel %.3e (%s[expert %d]); total counts %.0f vs %.0f; zero-count slices %d vs %d; "
          "%s vs %s%s"
          % ("FAIL" if bad else "ok", len(a), nslice, nval, worst[0], worst[1], worst[2], worst[3], mean,
             cworst[0], cworst[1], cworst[2], ca_sum, cb_sum, zero_a, zero_b, kva, kvb,
             (" (" + ", ".join(bad) + ")") if bad else ""))
    return 1 if bad else 0


def cmd_imatrix_dat(src, out, *opts):
    """imatrix-dat IN OUT [--ncall N] [--bogus] [--badlen NAME] [--trailer]:
    a legacy .dat imatrix from the GGUF imatrix IN (values: in_sum2 / counts
    * N, N calls); --bogus: plus an entry of a tensor no model has; --badlen:
    NAME's entry one value short; --trailer: llama-imatrix's trailer (last
    chunk, dataset name)."""
    opts = list(opts)
    ncall = int(opts[opts.index("--ncall") + 1]) if "--ncall" in opts else 1
    badlen = opts[opts.index("--badlen") + 1] if "--badlen" in opts else None
    g = read(src)
    entries = []
    for t in sorted(g.tensors, key=lambda t: t.name):
        if not t.name.endswith(".in_sum2"):
            continue
        w = t.name[:-8]
        sums = g.values(t)
        cnt = g.values(g.tensor(w + ".counts"))[0]
        vals = [struct.unpack("<f", struct.pack("<f", (v / cnt) * ncall))[0] for v in sums]
        if w == badlen:
            vals = vals[:-1]
        entries.append((w, vals))
    if "--bogus" in opts:
        entries.append(("blk.99.bogus.weight", [1.0] * 256))
    b = struct.pack("<i", len(entries))
    for w, vals in entries:
        b += struct.pack("<i", len(w)) + w.encode() + struct.pack("<ii", ncall, len(vals))
        b += struct.pack("<%df" % len(vals), *vals)
    if "--trailer" in opts:
        b += struct.pack("<ii", 345, 9) + b"calib.txt"
    with open(out, "wb") as f:
        f.write(b)
    return 0


def cmd_imatrix_synth(model, out, seed="7"):
    """imatrix-synth MODEL OUT [SEED]: a GGUF imatrix for MODEL's 2-D layer
    weights (not the norms) and stacked 3-D expert weights (one row per
    expert): in_sum2 uniform in [1, 100) (random.seed(SEED)), counts 51200
    per matrix, 100 chunks of 512."""
    g = read(model)
    ents = sorted((t.name, t.ne[0], t.ne[2] if len(t.ne) == 3 else 1) for t in g.tensors
                  if t.name.startswith("blk.") and len(t.ne) in (2, 3)
                  and not t.name.endswith("_norm.weight"))
    random.seed(int(seed))
    kvs = [("general.type", STRING, "imatrix"),
           ("imatrix.datasets", ARRAY, (STRING, ["synthetic.txt"])),
           ("imatrix.chunk_count", UINT32, 100), ("imatrix.chunk_size", UINT32, 512)]
    ts = []
    for name, n, nx in ents:
        for suf, vals, ne0 in ((".in_sum2", [random.uniform(1.0, 100.0) for _ in range(n * nx)], n),
                               (".counts", [51200.0] * nx, 1)):
            ts.append((name + suf, [ne0, nx], F32, struct.pack("<%df" % len(vals), *vals)))
    write(out, kvs, ts)
    return 0


# --- command line -------------------------------------------------------------

def cmd_evict(path):
    """evict F
    Drop F's pages from the page cache (fsync, then POSIX_FADV_DONTNEED)."""
    import os
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    return 0


def cmd_resident(path, name, ids="", margin="0"):
    """resident F NAME [IDS [MARGIN]]
    Which pages of tensor NAME (a row per ne[1] index) are in the page cache:
    mincore() over a fresh read-only mapping of F, the pages F shares with
    other tensors and MARGIN more at each end (read-ahead from the tensors
    next to it) left out. Prints "pages P resident R rows_pages S outside O":
    the pages looked at, those resident, those the rows IDS (comma
    separated) cover, and the resident pages no row of IDS covers."""
    import ctypes
    import mmap
    import os
    g = read(path)
    t = g.tensor(name)
    if t is None:
        raise ValueError("%s: no tensor %s" % (path, name))
    ps = mmap.PAGESIZE
    start = g.data_start + t.offset
    size = g.nbytes(t)
    row = size // t.ne[1] if len(t.ne) > 1 else size
    lo = -(-start // ps) + int(margin)
    hi = (start + size) // ps - int(margin)
    n = max(hi - lo, 0)
    seen = set()
    for i in (int(x) for x in ids.replace(",", " ").split()):
        a, b = start + i * row, start + (i + 1) * row
        seen.update(p for p in range(a // ps, (b - 1) // ps + 1) if lo <= p < hi)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                          ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]
    fd = os.open(path, os.O_RDONLY)
    fsize = os.fstat(fd).st_size
    base = libc.mmap(None, fsize, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
    os.close(fd)
    if base in (None, ctypes.c_void_p(-1).value):
        raise OSError(ctypes.get_errno(), "mmap")
    try:
        vec = ctypes.create_string_buffer(max(n, 1))
        if n and libc.mincore(base + lo * ps, n * ps, vec) != 0:
            raise OSError(ctypes.get_errno(), "mincore")
        res = [lo + i for i in range(n) if vec.raw[i] & 1]
    finally:
        libc.munmap(base, fsize)
    print("pages %d resident %d rows_pages %d outside %d"
          % (n, len(res), len(seen), len([p for p in res if p not in seen])))
    return 0


COMMANDS = {
    "types": cmd_types, "shapes": cmd_shapes, "kv": cmd_kv, "cmp": cmd_cmp, "same-data": cmd_same_data,
    "memwall-bytes": cmd_memwall_bytes, "strip": cmd_strip, "tensors-cmp": cmd_tensors_cmp,
    "digest": cmd_digest, "digest-cmp": cmd_digest_cmp, "cut-layers": cmd_cut_layers,
    "slim": cmd_slim, "drop": cmd_drop, "rename": cmd_rename, "header": cmd_header,
    "active-bytes": cmd_active_bytes, "imatrix-dat": cmd_imatrix_dat,
    "imatrix-cmp": cmd_imatrix_cmp, "imatrix-cmp-experts": cmd_imatrix_cmp_experts,
    "imatrix-synth": cmd_imatrix_synth, "evict": cmd_evict, "resident": cmd_resident,
}


def usage(out):
    out.write(__doc__)
    for fn in COMMANDS.values():
        out.write("\n" + "\n".join("  " + line.strip() for line in fn.__doc__.splitlines()) + "\n")


def main(argv):
    if not argv or argv[0] in ("help", "-h", "--help"):
        if argv:
            usage(sys.stdout)
            return 0
        sys.stderr.write(__doc__)
        return 2
    rc = 0
    while argv:
        n = argv.index("+") if "+" in argv else len(argv)
        cmd, args = argv[0], argv[1:n]
        argv = argv[n + 1:]
        if cmd not in COMMANDS:
            sys.stderr.write("mwgguf: unknown subcommand %r (see: mwgguf.py help)\n" % cmd)
            return 2
        try:
            r = COMMANDS[cmd](*args)
        except TypeError as e:
            if "positional argument" not in str(e):
                raise
            sys.stderr.write("mwgguf %s: %s\n%s\n" % (cmd, e, COMMANDS[cmd].__doc__))
            r = 2
        sys.stdout.flush()
        rc = rc or r or 0
    return rc


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
