#!/usr/bin/env python3
"""A tokenizer carrier: a tiny LlamaForCausalLM checkpoint with another
family's tokenizer files, for comparing tokenizers before (or besides) that
family converts.

    tok_carrier.py TOKDIR VOCAB OUTDIR

Copies tokenizer.json / tokenizer_config.json / tokenizer.model (those
present) from TOKDIR, writes config.json (hidden 64, 1 layer, vocab_size
VOCAB) and a model.safetensors of constant F16 weights (the values do not
matter to tokenization). Python 3 standard library only; deterministic.
"""
import json
import os
import shutil
import struct
import sys


def main(argv):
    if len(argv) != 4:
        sys.stderr.write(__doc__)
        return 2
    tokdir, vocab, out = argv[1], int(argv[2]), argv[3]
    os.makedirs(out, exist_ok=True)
    h, ff, heads = 64, 128, 4
    shapes = {"model.embed_tokens.weight": [vocab, h], "lm_head.weight": [vocab, h],
              "model.norm.weight": [h]}
    p = "model.layers.0."
    shapes.update({p + "input_layernorm.weight": [h], p + "post_attention_layernorm.weight": [h],
                   p + "self_attn.q_proj.weight": [h, h], p + "self_attn.k_proj.weight": [h, h],
                   p + "self_attn.v_proj.weight": [h, h], p + "self_attn.o_proj.weight": [h, h],
                   p + "mlp.gate_proj.weight": [ff, h], p + "mlp.up_proj.weight": [ff, h],
                   p + "mlp.down_proj.weight": [h, ff]})
    hdr, off = {}, 0
    for name in sorted(shapes):
        n = 1
        for d in shapes[name]:
            n *= d
        hdr[name] = {"dtype": "F16", "shape": shapes[name], "data_offsets": [off, off + 2 * n]}
        off += 2 * n
    hb = json.dumps(hdr, sort_keys=True).encode()
    hb += b" " * ((8 - len(hb) % 8) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(hb)))
        f.write(hb)
        for name in sorted(shapes):
            a, b = hdr[name]["data_offsets"]
            f.write(b"\x00\x2c" * ((b - a) // 2))  # 0.0625
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": h,
           "intermediate_size": ff, "num_hidden_layers": 1, "num_attention_heads": heads,
           "num_key_value_heads": heads, "rms_norm_eps": 1e-5, "rope_theta": 10000.0,
           "max_position_embeddings": 512, "vocab_size": vocab, "hidden_act": "silu",
           "tie_word_embeddings": False, "torch_dtype": "float16"}
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(cfg, f, indent=1, sort_keys=True)
    for fn in ("tokenizer.json", "tokenizer_config.json", "tokenizer.model"):
        if os.path.exists(os.path.join(tokdir, fn)):
            shutil.copyfile(os.path.join(tokdir, fn), os.path.join(out, fn))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
