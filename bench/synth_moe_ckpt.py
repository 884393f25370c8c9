#!/usr/bin/env python3
"""bench/synth_moe_ckpt.py OUT_DIR LAYERS — write a synthetic Hugging Face
Qwen3-MoE checkpoint with the shapes of Qwen/Qwen3-30B-A3B (hidden 2048, 32 q
heads / 4 kv heads of head_dim 128, q/k norm, 128 experts top-8 of
moe_intermediate_size 768, router mlp.gate, vocab 151936, untied lm_head) and
LAYERS layers into OUT_DIR: BF16 like the real model, per-expert tensors
(model.layers.N.mlp.experts.E.{gate,up,down}_proj.weight), shards of at most
SYNTH_MOE_SHARD_MB (default 2000 MB; a shard boundary may fall inside a
layer's experts) with model.safetensors.index.json. 2 layers = ~3.7 GB
(the embedding and the head alone are 1.24 GB; one layer's experts 1.2 GB).

env SYNTH_MOE_SHAPE="hidden moe_ff experts top_k heads kv_heads head_dim vocab"
for other shapes (a quick smoke run: "256 64 16 4 4 2 64 151936").

The values are deterministic small finite numbers (an LCG block, rotated per
tensor; norms near 1): not a trained model, so routing is arbitrary but
well-defined. The tokenizer files (the real Qwen3 tokenizer.json /
tokenizer_config.json, tests/fixtures/fetch_tokenizers.sh) are copied in by
the caller (bench/moe_scale_bench.sh). Python 3 standard library only."""
import json, os, struct, sys

if len(sys.argv) != 3:
    sys.exit("usage: synth_moe_ckpt.py OUT_DIR LAYERS")
out, L = sys.argv[1], int(sys.argv[2])
E, FX, NX, K, H, KV, HD, V = 2048, 768, 128, 8, 32, 4, 128, 151936
if os.environ.get("SYNTH_MOE_SHAPE"):
    E, FX, NX, K, H, KV, HD, V = (int(x) for x in os.environ["SYNTH_MOE_SHAPE"].split())
assert L >= 1 and 1 <= K <= NX, (L, K, NX)
SHARD = int(os.environ.get("SYNTH_MOE_SHARD_MB", "2000")) * 1000 * 1000

cfg = {
    "architectures": ["Qwen3MoeForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
    "bos_token_id": 151643, "decoder_sparse_step": 1, "eos_token_id": 151645, "head_dim": HD,
    "hidden_act": "silu", "hidden_size": E, "initializer_range": 0.02,
    "intermediate_size": 3 * E, "max_position_embeddings": 40960, "max_window_layers": L,
    "mlp_only_layers": [], "model_type": "qwen3_moe", "moe_intermediate_size": FX,
    "norm_topk_prob": True, "num_attention_heads": H, "num_experts": NX,
    "num_experts_per_tok": K, "num_hidden_layers": L, "num_key_value_heads": KV,
    "output_router_logits": False, "rms_norm_eps": 1e-06, "rope_scaling": None,
    "rope_theta": 1000000.0, "router_aux_loss_coef": 0.001, "sliding_window": None,
    "tie_word_embeddings": False, "torch_dtype": "bfloat16", "transformers_version": "4.51.0",
    "use_cache": True, "use_sliding_window": False, "vocab_size": V,
}
with open(os.path.join(out, "config.json"), "w") as f:
    json.dump(cfg, f, indent=2)

# (name, shape, is_norm) in the real checkpoint's order: embedding, layers
# (attention, router, experts, norms), final norm, head
t = [("model.embed_tokens.weight", (V, E), False)]
for i in range(L):
    p = "model.layers.%d." % i
    t += [(p + "self_attn.q_proj.weight", (H * HD, E), False),
          (p + "self_attn.k_proj.weight", (KV * HD, E), False),
          (p + "self_attn.v_proj.weight", (KV * HD, E), False),
          (p + "self_attn.o_proj.weight", (E, H * HD), False),
          (p + "self_attn.q_norm.weight", (HD,), True),
          (p + "self_attn.k_norm.weight", (HD,), True),
          (p + "mlp.gate.weight", (NX, E), False)]
    for x in range(NX):
        q = p + "mlp.experts.%d." % x
        t += [(q + "gate_proj.weight", (FX, E), False), (q + "up_proj.weight", (FX, E), False),
              (q + "down_proj.weight", (E, FX), False)]
    t += [(p + "input_layernorm.weight", (E,), True),
          (p + "post_attention_layernorm.weight", (E,), True)]
t += [("model.norm.weight", (E,), True), ("lm_head.weight", (V, E), False)]


def bf16(vals):
    """BF16 bytes of floats: the top half of each f32, rounded to nearest even."""
    u = struct.unpack("<%dI" % len(vals), struct.pack("<%df" % len(vals), *vals))
    return struct.pack("<%dH" % len(u), *[((x + 0x7FFF + ((x >> 16) & 1)) >> 16) for x in u])


# a 4 MiB block of small finite values (LCG, +-0.05), rotated per matrix
s, vals = 12345, []
for _ in range(1 << 21):
    s = (s * 1664525 + 1013904223) & 0xFFFFFFFF
    vals.append(((s >> 8) - 8388608) / 8388608.0 * 0.05)
block = bf16(vals)
normblk = bf16([1.0 + v for v in vals[:max(E, HD)]])  # norms: 1 +- 0.05

# shards: consecutive tensors, a new shard when the next tensor would pass SHARD
shards, cur, size = [], [], 0
for n, shp, isn in t:
    nb = 2
    for d in shp:
        nb *= d
    if cur and size + nb > SHARD:
        shards.append(cur)
        cur, size = [], 0
    cur.append((n, shp, isn, nb))
    size += nb
shards.append(cur)

wm, total, j = {}, 0, 0
for k, part in enumerate(shards):
    fn = "model-%05d-of-%05d.safetensors" % (k + 1, len(shards))
    hdr, off = {"__metadata__": {"format": "pt"}}, 0
    for n, shp, isn, nb in part:
        hdr[n] = {"dtype": "BF16", "shape": list(shp), "data_offsets": [off, off + nb]}
        off += nb
        wm[n] = fn
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(os.path.join(out, fn), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for n, shp, isn, nb in part:
            if isn:
                f.write(normblk[:nb])
                continue
            r = (j * 4098) % len(block)  # an even rotation: whole BF16 values
            j += 1
            rot = block[r:] + block[:r]
            need = nb
            while need > 0:
                c = rot[:min(need, len(rot))]
                f.write(c)
                need -= len(c)
    total += off
with open(os.path.join(out, "model.safetensors.index.json"), "w") as f:
    json.dump({"metadata": {"total_size": total}, "weight_map": wm}, f, indent=1)
print("synth_moe_ckpt: %d layers, %d tensors, %d bytes in %d shards" %
      (L, len(t), total, len(shards)))
