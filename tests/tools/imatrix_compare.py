#!/usr/bin/env python3
"""tests/tools/imatrix_compare.py — compare importance matrices (stdlib only).

usage: imatrix_compare.py OURS REF [--max-rel TOL] [--mean-rel TOL] [--counts-ratio]

OURS / REF: a GGUF imatrix (llama-imatrix / memwall calib), a legacy .dat
imatrix, or the reference .npz (numpy zip of float64 .npy arrays keyed by HF
weight names "<hf>.in_sum2" / "<hf>.counts", models/README.md). Values
compared: the importance in_sum2 / counts per input channel (for .dat: the
stored values / ncall). Prints entries, max and mean relative error and the
worst entry; exit 1 if a tolerance is exceeded or the entry sets differ.
"""
import struct
import sys
import zipfile

HF2GGUF = {
    "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def hf_to_gguf(name):
    # model.layers.N.self_attn.q_proj.weight -> blk.N.attn_q.weight
    p = name.split(".")
    if p[0] == "model" and p[1] == "layers":
        mod = ".".join(p[3:5])
        if mod in HF2GGUF:
            return "blk.%s.%s.weight" % (p[2], HF2GGUF[mod])
    return name


def read_npy(data):
    assert data[:6] == b"\x93NUMPY", "not a .npy"
    major = data[6]
    if major == 1:
        hl = struct.unpack_from("<H", data, 8)[0]
        off = 10
    else:
        hl = struct.unpack_from("<I", data, 8)[0]
        off = 12
    header = data[off:off + hl].decode("latin1")
    d = eval(header, {"__builtins__": {}}, {"False": False, "True": True})  # dict literal
    fmt = {"<f8": "d", "<f4": "f", "<i8": "q", "<i4": "i", "<u8": "Q"}[d["descr"]]
    n = 1
    for s in d["shape"]:
        n *= s
    return list(struct.unpack_from("<%d%s" % (n, fmt), data, off + hl))


def load_npz(path):
    z = zipfile.ZipFile(path)
    sums, counts = {}, {}
    for nm in z.namelist():
        key = nm[:-4] if nm.endswith(".npy") else nm
        arr = read_npy(z.read(nm))
        if key.endswith(".in_sum2"):
            sums[hf_to_gguf(key[:-8])] = arr
        elif key.endswith(".counts"):
            counts[hf_to_gguf(key[:-7])] = arr
    return {k: [v / counts[k][0] for v in sums[k]] for k in sums}, {k: counts[k][0] for k in counts}


def gguf_read(path):
    d = open(path, "rb").read()
    assert d[:4] == b"GGUF"
    ver, nt, nkv = struct.unpack_from("<IQQ", d, 4)
    p = 24

    def rstr(p):
        n = struct.unpack_from("<Q", d, p)[0]
        return d[p + 8:p + 8 + n].decode("utf-8", "replace"), p + 8 + n

    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def rval(t, p):
        if t == 8:
            return rstr(p)
        if t == 9:
            et, n = struct.unpack_from("<IQ", d, p)
            p += 12
            out = []
            for _ in range(n):
                v, p = rval(et, p)
                out.append(v)
            return out, p
        fmt = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q", 12: "d"}[t]
        return struct.unpack_from("<" + fmt, d, p)[0], p + sizes[t]

    kv = {}
    align = 32
    for _ in range(nkv):
        k, p = rstr(p)
        t = struct.unpack_from("<I", d, p)[0]
        p += 4
        v, p = rval(t, p)
        kv[k] = v
        if k == "general.alignment":
            align = v
    infos = []
    for _ in range(nt):
        nm, p = rstr(p)
        nd = struct.unpack_from("<I", d, p)[0]
        p += 4
        ne = struct.unpack_from("<%dQ" % nd, d, p)
        p += 8 * nd
        ty, off = struct.unpack_from("<IQ", d, p)
        p += 12
        infos.append((nm, ne, ty, off))
    start = (p + align - 1) // align * align
    tensors = {}
    for nm, ne, ty, off in infos:
        assert ty == 0, "expected f32 tensors"
        n = 1
        for x in ne:
            n *= x
        tensors[nm] = list(struct.unpack_from("<%df" % n, d, start + off))
    return kv, tensors


def load_gguf(path):
    kv, t = gguf_read(path)
    vals, counts = {}, {}
    for nm, v in t.items():
        if nm.endswith(".in_sum2"):
            w = nm[:-8]
            cs = t[w + ".counts"]  # one per expert of a stacked MoE tensor
            ne0 = len(v) // len(cs)
            vals[w] = [x / cs[i // ne0] if cs[i // ne0] else 1.0 for i, x in enumerate(v)]
            counts[w] = sum(cs)
    return vals, counts


def load_dat(path):
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


def load(path):
    head = open(path, "rb").read(4)
    if head == b"GGUF":
        return load_gguf(path)
    if head[:2] == b"PK":
        return load_npz(path)
    return load_dat(path)


def main(argv):
    args = argv[1:]
    tol_max = tol_mean = None
    files = []
    i = 0
    while i < len(args):
        if args[i] == "--max-rel":
            tol_max = float(args[i + 1]); i += 2
        elif args[i] == "--mean-rel":
            tol_mean = float(args[i + 1]); i += 2
        else:
            files.append(args[i]); i += 1
    a, ca = load(files[0])
    b, cb = load(files[1])
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
    bad = (tol_max is not None and worst[0] > tol_max) or (tol_mean is not None and mean > tol_mean)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
