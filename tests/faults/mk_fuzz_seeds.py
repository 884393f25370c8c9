#!/usr/bin/env python3
"""Write the seed corpora of tests/fuzz/fuzz_config.c and fuzz_imatrix.c.

    python3 tests/faults/mk_fuzz_seeds.py [REPO_ROOT]

tests/fuzz/corpus/config/   config.json files: the supported architectures
                            (llama, mistral, qwen2), every RoPE variant
                            (none, linear, llama3), explicit head_dim,
                            and broken ones (each kind of error hf_config.c
                            reports: syntax, types, ranges, contradictions).
tests/fuzz/corpus/imatrix/  importance matrices: GGUF (llama-imatrix's
                            layout: imatrix.* keys, F32 <w>.in_sum2 and
                            <w>.counts, one dense and one 2-expert entry)
                            and legacy .dat (with and without the trailer),
                            plus broken ones (missing keys, unpaired counts,
                            non-finite and negative counts, a cut file).

Python 3 standard library only; the same files every run (no randomness).
Each file is small (< 4 KiB) so libFuzzer's -max_len keeps all of it.
"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))
import mwgguf  # noqa: E402  (tests/lib: the tests' one GGUF module)

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "..", "..")
CFG_DIR = os.path.join(ROOT, "tests", "fuzz", "corpus", "config")
IM_DIR = os.path.join(ROOT, "tests", "fuzz", "corpus", "imatrix")

# --- config.json ---------------------------------------------------------------

LLAMA = {
    "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 256,
    "intermediate_size": 768, "num_attention_heads": 8, "num_key_value_heads": 4,
    "num_hidden_layers": 8, "vocab_size": 4096, "max_position_embeddings": 512,
    "rms_norm_eps": 1e-05, "rope_theta": 10000.0, "rope_scaling": None, "hidden_act": "silu",
    "tie_word_embeddings": False, "attention_bias": False, "mlp_bias": False,
    "torch_dtype": "float16", "head_dim": 32,
}


def variant(base, **kw):
    d = dict(base)
    for k, v in kw.items():
        if v is DROP:
            d.pop(k, None)
        else:
            d[k] = v
    return d


DROP = object()

CONFIGS = {
    "llama.json": LLAMA,
    "llama_nohead.json": variant(LLAMA, head_dim=DROP, num_key_value_heads=DROP),
    "llama3.json": variant(LLAMA, rope_theta=500000.0, vocab_size=128256, rope_scaling={
        "rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
        "original_max_position_embeddings": 8192}, max_position_embeddings=131072),
    "linear.json": variant(LLAMA, rope_scaling={"type": "linear", "factor": 2.0}),
    "mistral.json": variant(LLAMA, architectures=["MistralForCausalLM"], model_type="mistral",
                            sliding_window=4096, head_dim=128, hidden_size=512),
    "qwen2.json": {
        "architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
        "intermediate_size": 4864, "num_attention_heads": 14, "num_key_value_heads": 2,
        "num_hidden_layers": 24, "vocab_size": 151936, "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "tie_word_embeddings": True,
        "hidden_act": "silu", "torch_dtype": "bfloat16", "use_sliding_window": False},
    # broken, one kind each
    "bad_arch.json": variant(LLAMA, architectures=["GPT2LMHeadModel"]),
    "bad_arch_type.json": variant(LLAMA, architectures="LlamaForCausalLM"),
    "bad_model_type.json": variant(LLAMA, model_type="qwen2"),
    "bad_missing.json": variant(LLAMA, hidden_size=DROP),
    "bad_type.json": variant(LLAMA, num_hidden_layers="8"),
    "bad_float.json": variant(LLAMA, num_attention_heads=8.5),
    "bad_range.json": variant(LLAMA, num_hidden_layers=100000),
    "bad_negative.json": variant(LLAMA, vocab_size=-1),
    "bad_kv.json": variant(LLAMA, num_key_value_heads=3),
    "bad_oddhead.json": variant(LLAMA, head_dim=33),
    "bad_act.json": variant(LLAMA, hidden_act="gelu"),
    "bad_rope.json": variant(LLAMA, rope_scaling={"type": "yarn", "factor": 4.0}),
    "bad_rope_factor.json": variant(LLAMA, rope_scaling={"type": "linear", "factor": "x"}),
    "llama3_defaults.json": variant(LLAMA, rope_scaling={"rope_type": "llama3",
                                                         "factor": 8.0}),
    "bad_bool.json": variant(LLAMA, tie_word_embeddings=1),
    "bad_qwen_mlp.json": variant(json.loads(json.dumps({
        "architectures": ["Qwen2ForCausalLM"], "hidden_size": 64, "intermediate_size": 128,
        "num_attention_heads": 4, "num_hidden_layers": 2, "vocab_size": 300,
        "max_position_embeddings": 128, "rms_norm_eps": 1e-6})), mlp_bias=True),
}
RAW_CONFIGS = {
    "bad_syntax.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 256,',
    "bad_toplevel.json": b'[1, 2, 3]',
    "bad_nested.json": b'{"architectures": [' + b'[' * 200 + b']' * 200 + b']}',
    "bad_huge_number.json": b'{"architectures": ["LlamaForCausalLM"], "hidden_size": 1e400}',
    "bad_utf8.json": b'{"architectures": ["Llama\xff\xfeForCausalLM"]}',
    "bad_nul.json": b'{"architectures": ["LlamaForCausalLM\\u0000x"]}',
    "empty.json": b'',
}

# --- imatrix -------------------------------------------------------------------

GGUF_STRING, GGUF_ARRAY, GGUF_U32 = mwgguf.STRING, mwgguf.ARRAY, mwgguf.UINT32


def gguf(kvs, tensors):
    """kvs: [(key, type, value)], value for ARRAY: (elem_type, [values]);
    tensors: [(name, [ne...], bytes)] all F32."""
    return mwgguf.encode(kvs, [(name, ne, mwgguf.F32, data) for name, ne, data in tensors])


def f32s(vals):
    return b"".join(struct.pack("<f", v) for v in vals)


IM_KEYS = [("general.type", GGUF_STRING, "imatrix"),
           ("imatrix.datasets", GGUF_ARRAY, (GGUF_STRING, ["calib.txt", "chats.jsonl"])),
           ("imatrix.chunk_count", GGUF_U32, 3), ("imatrix.chunk_size", GGUF_U32, 256)]
SUMS8 = f32s([1.5 * (i + 1) for i in range(8)])
MOE = f32s([0.25 * i for i in range(8)])  # 4 columns x 2 experts
GOOD_T = [("blk.0.attn_q.weight.in_sum2", [8], SUMS8), ("blk.0.attn_q.weight.counts", [1], f32s([3])),
          ("blk.0.ffn_down_exps.weight.in_sum2", [4, 2], MOE),
          ("blk.0.ffn_down_exps.weight.counts", [1, 2], f32s([3, 0]))]


def legacy(entries, trailer=None):
    out = struct.pack("<i", len(entries))
    for name, ncall, vals in entries:
        b = name.encode()
        out += struct.pack("<i", len(b)) + b + struct.pack("<ii", ncall, len(vals)) + f32s(vals)
    if trailer is not None:
        n, ds = trailer
        out += struct.pack("<ii", n, len(ds)) + ds
    return out


def imatrices():
    good = gguf(IM_KEYS, GOOD_T)
    leg = [("blk.0.attn_q.weight", 3, [3.0 * i for i in range(8)]),
           ("output.weight", 0, [1.0, 2.0, 3.0, 4.0])]
    return {
        "good.gguf": good,
        "one_entry.gguf": gguf(IM_KEYS, GOOD_T[:2]),
        "no_keys.gguf": gguf(IM_KEYS[:1], GOOD_T),
        "wrong_key_type.gguf": gguf(IM_KEYS[:2] + [("imatrix.chunk_count", GGUF_STRING, "3"),
                                                   IM_KEYS[3]], GOOD_T),
        "unpaired_counts.gguf": gguf(IM_KEYS, GOOD_T[1:2]),
        "no_counts.gguf": gguf(IM_KEYS, GOOD_T[0:1]),
        "split_mismatch.gguf": gguf(IM_KEYS, [GOOD_T[0], ("blk.0.attn_q.weight.counts", [3],
                                                          f32s([1, 1, 1]))]),
        "nan_count.gguf": gguf(IM_KEYS, [GOOD_T[0], ("blk.0.attn_q.weight.counts", [1],
                                                     f32s([float("nan")]))]),
        "neg_count.gguf": gguf(IM_KEYS, [GOOD_T[0], ("blk.0.attn_q.weight.counts", [1],
                                                     f32s([-2]))]),
        "inf_sum.gguf": gguf(IM_KEYS, [("w.in_sum2", [2], f32s([float("inf"), 1])),
                                       ("w.counts", [1], f32s([1]))]),
        "cut.gguf": good[: len(good) - 40],
        "legacy.dat": legacy(leg, (7, b"calib.txt")),
        "legacy_notrailer.dat": legacy(leg),
        "legacy_nul_dataset.dat": legacy(leg[:1], (1, b"a\0b")),
        "legacy_cut.dat": legacy(leg)[:30],
        "legacy_bad_count.dat": struct.pack("<i", -5),
        "legacy_dup.dat": legacy([leg[0], leg[0]]),
        "legacy_trailing.dat": legacy(leg, (1, b"x")) + b"junk",
    }


def main():
    os.makedirs(CFG_DIR, exist_ok=True)
    os.makedirs(IM_DIR, exist_ok=True)
    for name, d in CONFIGS.items():
        with open(os.path.join(CFG_DIR, name), "wb") as f:
            f.write(json.dumps(d, indent=2).encode() + b"\n")
    for name, b in RAW_CONFIGS.items():
        with open(os.path.join(CFG_DIR, name), "wb") as f:
            f.write(b)
    for name, b in imatrices().items():
        with open(os.path.join(IM_DIR, name), "wb") as f:
            f.write(b)


main()
