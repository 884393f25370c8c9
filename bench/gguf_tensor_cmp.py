#!/usr/bin/env python3
"""bench/gguf_tensor_cmp.py A.gguf B.gguf — compare the tensor data of two
GGUF files: the same tensor names, and for each the same ggml type, shape and
data bytes (metadata keys and tensor order may differ). Standalone (no gguf-py,
no numpy): parses GGUF v2/v3 headers with struct, reads data in 16 MiB pieces.
Prints one summary line; exit 0 when identical, 1 when not, 2 on bad input."""
import struct
import sys

GGUF_ALIGN_KEY = "general.alignment"
# ggml type -> (block elements, block bytes), the types a converter writes
TYPES = {0: (1, 4), 1: (1, 2), 30: (1, 2), 8: (32, 34), 2: (32, 18), 3: (32, 20)}
SCALAR = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}


class Reader:
    def __init__(self, f):
        self.f = f

    def get(self, fmt):
        n = struct.calcsize("<" + fmt)
        b = self.f.read(n)
        if len(b) != n:
            raise ValueError("truncated header")
        return struct.unpack("<" + fmt, b)

    def string(self):
        (n,) = self.get("Q")
        b = self.f.read(n)
        if len(b) != n:
            raise ValueError("truncated string")
        return b.decode("utf-8", "replace")

    def value(self, vt):
        if vt in SCALAR:
            return self.get(SCALAR[vt])[0]
        if vt == 8:
            return self.string()
        if vt == 9:
            et, n = self.get("IQ")
            return [self.value(et) for _ in range(n)]
        raise ValueError("unknown value type %d" % vt)


def load(path):
    f = open(path, "rb")
    r = Reader(f)
    magic, version = r.get("4sI")
    if magic != b"GGUF" or version not in (2, 3):
        raise ValueError("%s: not GGUF v2/v3" % path)
    n_t, n_kv = r.get("QQ")
    align = 32
    for _ in range(n_kv):
        k = r.string()
        (vt,) = r.get("I")
        v = r.value(vt)
        if k == GGUF_ALIGN_KEY:
            align = v
    tensors = {}
    for _ in range(n_t):
        name = r.string()
        (nd,) = r.get("I")
        ne = r.get("%dQ" % nd)
        t, off = r.get("IQ")
        if t not in TYPES:
            raise ValueError("%s: tensor %s has type %d (not compared here)" % (path, name, t))
        be, bb = TYPES[t]
        cnt = 1
        for d in ne:
            cnt *= d
        tensors[name] = (t, tuple(ne), off, cnt // be * bb)
    base = f.tell()
    base += (align - base % align) % align
    return f, base, tensors


def main():
    if len(sys.argv) != 3:
        print(__doc__.strip().splitlines()[0])
        return 2
    try:
        fa, ba, ta = load(sys.argv[1])
        fb, bb, tb = load(sys.argv[2])
    except (OSError, ValueError) as e:
        print("error: %s" % e)
        return 2
    bad = []
    if set(ta) != set(tb):
        bad.append("names differ: only in A %s, only in B %s"
                   % (sorted(set(ta) - set(tb))[:5], sorted(set(tb) - set(ta))[:5]))
    total = 0
    for name in sorted(set(ta) & set(tb)):
        a, b = ta[name], tb[name]
        if a[0] != b[0] or a[1] != b[1]:
            bad.append("%s: type/shape %s %s vs %s %s" % (name, a[0], a[1], b[0], b[1]))
            continue
        fa.seek(ba + a[2])
        fb.seek(bb + b[2])
        left = a[3]
        while left:
            k = min(left, 16 << 20)
            x, y = fa.read(k), fb.read(k)
            if len(x) != k or len(y) != k:
                bad.append("%s: data truncated" % name)
                break
            if x != y:
                bad.append("%s: data differs" % name)
                break
            left -= k
        total += a[3]
    if bad:
        print("DIFFERENT: %d problem(s) among %d/%d tensors; first: %s"
              % (len(bad), len(ta), len(tb), "; ".join(bad[:3])))
        return 1
    print("IDENTICAL tensor data: %d tensors, %d bytes (same names, types, shapes, bytes)"
          % (len(ta), total))
    return 0


if __name__ == "__main__":
    sys.exit(main())
