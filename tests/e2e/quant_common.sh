# Shared helpers of tests/e2e/quant_*.sh and bench/quant_bench.sh (sourced).
# Environment from ctest (tests/CMakeLists.txt mw_shell_test): MW_BIN, MW_TMP,
# MW_EMU, MW_SHARED, MW_DATASETS, MW_SRC.
. "$(dirname "${BASH_SOURCE[0]}")/common.sh"
[ -n "${MW_QUANT_NO_SHM:-}" ] || scratch_on_shm quant
F16=$(ref tinyllama-8m.llamacpp-f16.gguf)
IMAT=$(ref tinyllama-8m.llamacpp.imatrix.gguf)
PRESETS="Q8_0 Q6_K Q5_K_M Q5_K_S Q4_K_M Q4_K_S Q4_0 Q3_K_L Q3_K_M Q3_K_S Q2_K"
EXTRA_PRESETS="Q5_1 Q5_0 Q4_1 IQ4_NL"

# The python helpers (standard library only), written once into $T/qtool.py:
#   cmp A B            whole files equal once memwall.* KVs are dropped
#                      from A and B ("identical <bytes>" / what differs)
#   header OUT ARCH EMBD FF LAYERS HEADS KV VOCAB TIED
#                      a header-only llama-shaped GGUF (no tensor data)
#   dat IN.gguf OUT.dat [--ncall N] [--bogus] [--badlen NAME] [--trailer]
#                      legacy .dat from a GGUF imatrix (values * ncall)
#   memwall_bytes F    bytes of F's memwall.* KVs
#   sameblob A B       the tensor data blobs are equal
cat > "$T/qtool.py" << 'PYEOF'
import struct, sys

def parse(path):
    d = open(path, 'rb').read()
    pos = 0
    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from('<' + fmt, d, pos)
        pos += struct.calcsize('<' + fmt)
        return v[0]
    def rstr():
        nonlocal pos
        n = rd('Q'); s = d[pos:pos + n]; pos += n
        return s
    SZ = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
    def skip(t):
        nonlocal pos
        if t == 8: rstr()
        elif t == 9:
            et = rd('I'); n = rd('Q')
            for _ in range(n): skip(et)
        else: pos += SZ[t]
    assert d[:4] == b'GGUF', path
    pos = 4
    ver = rd('I'); nt = rd('Q'); nkv = rd('Q')
    kvs = []
    for _ in range(nkv):
        s = pos; k = rstr(); t = rd('I'); skip(t); kvs.append((k, d[s:pos]))
    infos = []
    for _ in range(nt):
        s = pos; name = rstr(); nd = rd('I'); ne = [rd('Q') for _ in range(nd)]
        ty = rd('I'); off = rd('Q')
        infos.append((name, ne, ty, off, d[s:pos]))
    ds = (pos + 31) // 32 * 32
    return d, ver, kvs, infos, ds

def stripped(path):
    d, ver, kvs, infos, ds = parse(path)
    keep = [kv for kv in kvs if not kv[0].startswith(b'memwall.')]
    h = b'GGUF' + struct.pack('<IQQ', ver, len(infos), len(keep))
    h += b''.join(v for _, v in keep) + b''.join(t[4] for t in infos)
    h += b'\0' * ((-len(h)) % 32)
    return h + d[ds:], kvs, infos, d[ds:]

def cmd_cmp(a, b):
    sa, ka, ia, ba = stripped(a)
    sb, kb, ib, bb = stripped(b)
    if sa == sb:
        print('identical', len(sa)); return 0
    ka = [k for k in ka if not k[0].startswith(b'memwall.')]
    kb = [k for k in kb if not k[0].startswith(b'memwall.')]
    if [k for k, _ in ka] != [k for k, _ in kb]:
        print('KV names differ:', [k.decode() for k, _ in ka], [k.decode() for k, _ in kb])
    else:
        for x, y in zip(ka, kb):
            if x != y: print('KV %s differs' % x[0].decode())
    for x, y in zip(ia, ib):
        if x[:3] != y[:3]: print('tensor info differs:', x[:3], y[:3])
    print('tensor data identical' if ba == bb else 'tensor data differs'); return 1

def cmd_sameblob(a, b):
    x = parse(a); y = parse(b)
    return 0 if x[0][x[4]:] == y[0][y[4]:] else 1

def cmd_memwall_bytes(f):
    d, ver, kvs, infos, ds = parse(f)
    print(sum(len(v) for k, v in kvs if k.startswith(b'memwall.')))

def gstr(s):
    s = s.encode() if isinstance(s, str) else s
    return struct.pack('<Q', len(s)) + s

def cmd_header(out, arch, embd, ff, nl, nh, nkv, vocab, tied):
    embd, ff, nl, nh, nkv, vocab, tied = map(int, (embd, ff, nl, nh, nkv, vocab, tied))
    kvd = embd // nh * nkv
    kv = [('general.architecture', 8, gstr(arch))]
    for k, v in (('block_count', nl), ('context_length', 4096), ('embedding_length', embd),
                 ('feed_forward_length', ff), ('attention.head_count', nh),
                 ('attention.head_count_kv', nkv), ('vocab_size', vocab)):
        kv.append(('%s.%s' % (arch, k), 4, struct.pack('<I', v)))
    kv.append(('%s.attention.layer_norm_rms_epsilon' % arch, 6, struct.pack('<f', 1e-5)))
    kv.append(('general.file_type', 4, struct.pack('<I', 1)))
    t = [('token_embd.weight', [embd, vocab], 1), ('output_norm.weight', [embd], 0)]
    if not tied: t.append(('output.weight', [embd, vocab], 1))
    for l in range(nl):
        p = 'blk.%d.' % l
        t += [(p + 'attn_norm.weight', [embd], 0), (p + 'attn_q.weight', [embd, embd], 1),
              (p + 'attn_k.weight', [embd, kvd], 1), (p + 'attn_v.weight', [embd, kvd], 1),
              (p + 'attn_output.weight', [embd, embd], 1), (p + 'ffn_norm.weight', [embd], 0),
              (p + 'ffn_gate.weight', [embd, ff], 1), (p + 'ffn_up.weight', [embd, ff], 1),
              (p + 'ffn_down.weight', [ff, embd], 1)]
    h = b'GGUF' + struct.pack('<IQQ', 3, len(t), len(kv))
    for k, ty, v in kv: h += gstr(k) + struct.pack('<I', ty) + v
    off = 0
    for name, ne, ty in t:
        h += gstr(name) + struct.pack('<I', len(ne)) + b''.join(struct.pack('<Q', x) for x in ne)
        h += struct.pack('<IQ', ty, off)
        n = 1
        for x in ne: n *= x
        off += (n * (4 if ty == 0 else 2) + 31) // 32 * 32
    h += b'\0' * ((-len(h)) % 32)
    open(out, 'wb').write(h)

def cmd_dat(src, out, *opts):
    opts = list(opts)
    ncall = int(opts[opts.index('--ncall') + 1]) if '--ncall' in opts else 1
    badlen = opts[opts.index('--badlen') + 1] if '--badlen' in opts else None
    d, ver, kvs, infos, ds = parse(src)
    tens = {i[0].decode(): i for i in infos}
    entries = []
    for name in sorted(tens):
        if not name.endswith('.in_sum2'): continue
        w = name[:-8]
        s = tens[name]; c = tens[w + '.counts']
        n = 1
        for x in s[1]: n *= x
        sums = struct.unpack_from('<%df' % n, d, ds + s[3])
        cnt = struct.unpack_from('<f', d, ds + c[3])[0]
        vals = [struct.unpack('<f', struct.pack('<f', (v / cnt) * ncall))[0] for v in sums]
        if w == badlen: vals = vals[:-1]
        entries.append((w, vals))
    if '--bogus' in opts: entries.append(('blk.99.bogus.weight', [1.0] * 256))
    b = struct.pack('<i', len(entries))
    for w, vals in entries:
        b += struct.pack('<i', len(w)) + w.encode() + struct.pack('<ii', ncall, len(vals))
        b += struct.pack('<%df' % len(vals), *vals)
    if '--trailer' in opts: b += struct.pack('<ii', 345, 9) + b'calib.txt'
    open(out, 'wb').write(b)

if __name__ == '__main__': # (quant_iq_peer.sh's iqtool imports parse)
    sys.exit({'cmp': cmd_cmp, 'header': cmd_header, 'dat': cmd_dat,
              'memwall_bytes': cmd_memwall_bytes, 'sameblob': cmd_sameblob}[sys.argv[1]](*sys.argv[2:]) or 0)
PYEOF
qtool() { python3 "$T/qtool.py" "$@"; }

# dry_types SRC PRESET [args]: "name type" per tensor from memwall quant --dry-run
dry_types() {
    local src=$1 preset=$2
    shift 2
    $MW_EMU "$MEMWALL" quant "$src" --preset "$preset" --dry-run -q "$@" |
        awk 'NR > 1 && $1 ~ /^[0-9]+$/ { print $2, $5 }'
}
