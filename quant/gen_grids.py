# quant/gen_grids.py — writes quant/quant_grids.c from ggml-common.h (llama.cpp 80fb11ac):
#   python3 quant/gen_grids.py LLAMA_SRC/ggml/src/ggml-common.h quant/quant_grids.c
# (LLAMA_SRC: git clone .peer/node_modules/node-llama-cpp/llama/gitRelease.bundle)
import re,sys
src=open(sys.argv[1]).read()
def table(name):
    m=re.search(r'GGML_TABLE_BEGIN\((\w+),\s*'+name+r',\s*(\w+)\)(.*?)GGML_TABLE_END\(\)',src,re.S)
    vals=[v.strip() for v in m.group(3).replace('\n',' ').split(',') if v.strip()]
    return m.group(1),vals
out=[]
out.append('''/*
 * quant/quant_grids.c — the lattice tables of ggml's i-quants (docs/formats.md
 * §3.6): each grid entry is 8 (IQ2_*, IQ1_*) or 4 (IQ3_*) magnitudes, one
 * byte each, packed little-endian into a u64 / u32; ksigns_iq2xs maps a 7-bit
 * sign index to the 8 sign bits (bit 7 = parity). The values are the format
 * (ggml-common.h at llama.cpp 80fb11ac) and are generated from it by
 * quant/gen_grids.py; they are data, not code.
 */
#include "quant/quant_grids.h"
''')
for name,ctype,cname,n in [('ksigns_iq2xs','uint8_t','quant_ksigns_iq2xs',128),
    ('iq2xxs_grid','uint64_t','quant_iq2xxs_grid',256),('iq2xs_grid','uint64_t','quant_iq2xs_grid',512),
    ('iq2s_grid','uint64_t','quant_iq2s_grid',1024),('iq3xxs_grid','uint32_t','quant_iq3xxs_grid',256),
    ('iq3s_grid','uint32_t','quant_iq3s_grid',512),('iq1s_grid','uint64_t','quant_iq1s_grid',2048)]:
    t,vals=table(name)
    assert t==ctype and len(vals)==n,(name,t,len(vals))
    per = 16 if ctype=='uint8_t' else (4 if ctype=='uint64_t' else 8)
    out.append(f'\nconst {ctype} {cname}[{n}] = {{')
    for i in range(0,n,per):
        if ctype=='uint8_t': s=', '.join('%3d'%int(v) for v in vals[i:i+per])
        elif ctype=='uint64_t': s=', '.join('0x%016xu'%int(v,16) for v in vals[i:i+per])
        else: s=', '.join('0x%08xu'%int(v,16) for v in vals[i:i+per])
        out.append('    '+s+',')
    out.append('};')
open(sys.argv[2],"w").write('\n'.join(out)+'\n')
