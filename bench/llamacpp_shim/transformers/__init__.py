"""Stand-in for the two `transformers` names llama.cpp's convert_hf_to_gguf.py
needs for a llama checkpoint, plus the torch >= 2.1 dtype names it
references. Bench-only (bench/convert_vs_llamacpp.sh puts this directory on
PYTHONPATH): Debian 12 ships torch 1.13 and no transformers, and PyPI is not
reachable here.

- AutoConfig.from_pretrained(dir).to_dict(): config.json as a dict (the
  converter reads hparams from it; transformers would add defaults the llama
  path does not use).
  For a Gemma 3 ConditionalGeneration config (model_type "gemma3") the
  sparse text_config gets Gemma3TextConfig's defaults, as transformers'
  to_dict() gives them (GEMMA3_TEXT_DEFAULTS below).
- AutoTokenizer: for a directory with a tokenizer.json (the converter's
  GPT-2-style vocab path, e.g. Qwen3): a minimal tokenizer over that file
  (bench/llamacpp_shim/transformers/_tok.py: vocab with the added tokens,
  get_vocab, get_added_vocab, added_tokens_decoder, encode/decode; encode is
  byte-level BPE with the pre-tokenizer's regex and NFC, exact for the
  texts the converter encodes: its pre-tokenizer hash text and the added
  tokens). Without a tokenizer.json it raises, so the converter takes its
  SentencePiece path (tokenizer.model), which needs only
  python3-sentencepiece.
- A SentencePiece-style tokenizer.json (byte_fallback: Gemma 4's fixtures,
  the Gemma 3 vocabulary made Gemma 4-like) gets _tok.SpmJsonTokenizer: the
  vocabulary, added and special tokens gguf-py's LlamaHfVocab reads (Gemma
  4's set_vocab), no encoding.
- Qwen3.5's pre-tokenizer: the converter names a BPE pre-tokenizer by
  hashing its tokenization of a check text, and the qwen35 hashes are those
  of Qwen3.5's 248k vocabulary, which no package here ships. A tokenizer.json
  whose Split regex is Qwen3.5's (the fixtures' Qwen3 vocabulary made
  Qwen3.5-style) is therefore named "qwen35" directly: AutoTokenizer wraps
  the converter's TextModel.get_vocab_base_pre to return it for such a
  tokenizer (every other tokenizer still goes through the hash).
- torch.float8_e4m3fn / float8_e5m2 / uint16 / uint32 / uint64: the converter
  names them in dtype tables at import time; stand-ins are distinct objects
  that no tensor of an F16/BF16/F32 checkpoint ever has.
"""
import json
import os

import torch

for _name in ("float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64"):
    if not hasattr(torch, _name):
        setattr(torch, _name, type("memwall_shim_" + _name, (), {})())


class _Config:
    def __init__(self, d):
        self._d = d

    def to_dict(self):
        return dict(self._d)

    def __getattr__(self, k):
        try:
            return self.__dict__["_d"][k]
        except KeyError:
            raise AttributeError(k) from None


# transformers' Gemma3TextConfig defaults (the keys the converter reads)
GEMMA3_TEXT_DEFAULTS = {
    "vocab_size": 262208, "hidden_size": 2304, "intermediate_size": 9216,
    "num_hidden_layers": 26, "num_attention_heads": 8, "num_key_value_heads": 4,
    "head_dim": 256, "hidden_activation": "gelu_pytorch_tanh",
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-6, "rope_theta": 1000000.0,
    "attention_bias": False, "attention_dropout": 0.0, "query_pre_attn_scalar": 256,
    "sliding_window": 4096, "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "rope_scaling": None, "rope_local_base_freq": 10000.0, "sliding_window_pattern": 6,
}


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        with open(os.path.join(str(path), "config.json"), encoding="utf-8") as f:
            d = json.load(f)
        if d.get("model_type") == "gemma3" and isinstance(d.get("text_config"), dict):
            tc = dict(GEMMA3_TEXT_DEFAULTS)
            tc.update(d["text_config"])
            d["text_config"] = tc
        return _Config(d)


def _pre_override():
    """Wrap the converter's TextModel.get_vocab_base_pre (once) so that a
    tokenizer flagged memwall_pre (_tok.py: a tokenizer.json whose Split
    regex is Qwen3.5's) gets that pre-tokenizer name without its hash."""
    import sys
    base = sys.modules.get("conversion.base")
    tm = getattr(base, "TextModel", None)
    if tm is None or getattr(tm.get_vocab_base_pre, "memwall_shim", False):
        return
    orig = tm.get_vocab_base_pre

    def get_vocab_base_pre(self, tokenizer):
        pre = getattr(tokenizer, "memwall_pre", None)
        return pre if pre else orig(self, tokenizer)

    get_vocab_base_pre.memwall_shim = True
    tm.get_vocab_base_pre = get_vocab_base_pre


class AutoTokenizer:
    @staticmethod
    def from_pretrained(path, *args, **kwargs):
        tj = os.path.join(str(path), "tokenizer.json")
        if os.path.isfile(tj):
            with open(tj, encoding="utf-8") as f:
                if json.load(f).get("model", {}).get("byte_fallback"):
                    from ._tok import SpmJsonTokenizer
                    return SpmJsonTokenizer(str(path))
            from ._tok import JsonTokenizer
            tok = JsonTokenizer(str(path))
            if tok.memwall_pre:
                _pre_override()
            return tok
        raise OSError("memwall bench shim: no transformers tokenizer (SentencePiece path only)")
