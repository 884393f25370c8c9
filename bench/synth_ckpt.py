#!/usr/bin/env python3
"""bench/synth_ckpt.py OUT_DIR LAYERS [F16|BF16] — write a synthetic Hugging Face llama
checkpoint (TinyLlama-1.1B shapes: hidden 2048, FFN 5632, 32 heads / 4 KV
heads, vocab 32000; F16 (default) or BF16; two shards + index; 22 layers = 2.2 GB) into OUT_DIR.
env SYNTH_SHAPE="n_embd n_ff heads kv_heads vocab" for other shapes, SYNTH_OUTLIERS=1 for
rare 10x values.
The values are small finite numbers from an LCG, so conversions of it are
deterministic. The tokenizer files are copied in by the caller. Used by
bench/convert_bench.sh and bench/convert_vs_llamacpp.sh."""
import json, os, struct, sys
out, L = sys.argv[1], int(sys.argv[2])
DT = sys.argv[3] if len(sys.argv) > 3 else "F16"
assert DT in ("F16", "BF16"), DT
E, F, H, KV, V = 2048, 5632, 32, 4, 32000
if os.environ.get("SYNTH_SHAPE"):  # "n_embd n_ff heads kv_heads vocab" (bench/workstation_bench.sh)
    E, F, H, KV, V = (int(x) for x in os.environ["SYNTH_SHAPE"].split())
OUTLIERS = os.environ.get("SYNTH_OUTLIERS") == "1"  # every 997th value 10x
hd = E // H
cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": E,
       "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
       "num_key_value_heads": KV, "vocab_size": V, "max_position_embeddings": 2048,
       "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "tie_word_embeddings": False,
       "hidden_act": "silu", "torch_dtype": "float16" if DT == "F16" else "bfloat16"}
json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=2)
t = {"model.embed_tokens.weight": (V, E), "model.norm.weight": (E,), "lm_head.weight": (V, E)}
for i in range(L):
    p = "model.layers.%d." % i
    t.update({p + "input_layernorm.weight": (E,), p + "post_attention_layernorm.weight": (E,),
              p + "self_attn.q_proj.weight": (H * hd, E), p + "self_attn.k_proj.weight": (KV * hd, E),
              p + "self_attn.v_proj.weight": (KV * hd, E), p + "self_attn.o_proj.weight": (E, H * hd),
              p + "mlp.gate_proj.weight": (F, E), p + "mlp.up_proj.weight": (F, E),
              p + "mlp.down_proj.weight": (E, F)})
# a 4 MiB block of small finite F16 values (LCG), rotated per tensor
s, vals = 12345, []
for _ in range(1 << 21):
    s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
    vals.append(((s >> 8) - 8388608) / 8388608.0 * (0.5 if OUTLIERS and len(vals) % 997 == 0 else 0.05))
if DT == "F16":
    block = struct.pack("<%de" % len(vals), *vals)
else:  # BF16: the top half of each f32, rounded to nearest even
    u = struct.unpack("<%dI" % len(vals), struct.pack("<%df" % len(vals), *vals))
    block = struct.pack("<%dH" % len(u), *[((x + 0x7FFF + ((x >> 16) & 1)) >> 16) for x in u])
names = sorted(t)
half = len(names) // 2
wm = {}
for k, part in enumerate((names[:half], names[half:])):
    fn = "model-%05d-of-00002.safetensors" % (k + 1)
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for n in part:
        cnt = 1
        for d in t[n]:
            cnt *= d
        hdr[n] = {"dtype": DT, "shape": list(t[n]), "data_offsets": [off, off + 2 * cnt]}
        off += 2 * cnt
        wm[n] = fn
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, fn), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for j, n in enumerate(part):
            need = hdr[n]["data_offsets"][1] - hdr[n]["data_offsets"][0]
            r = (j * 4096) % len(block)
            rot = block[r:] + block[:r]
            while need > 0:
                c = rot[:min(need, len(rot))]
                f.write(c)
                need -= len(c)
json.dump({"metadata": {}, "weight_map": wm},
          open(os.path.join(out, "model.safetensors.index.json"), "w"), indent=1)
