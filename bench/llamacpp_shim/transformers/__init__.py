"""Stand-in for the two `transformers` names llama.cpp's convert_hf_to_gguf.py
needs for a llama checkpoint, plus the torch >= 2.1 dtype names it
references. Bench-only (bench/convert_vs_llamacpp.sh puts this directory on
PYTHONPATH): Debian 12 ships torch 1.13 and no transformers, and PyPI is not
reachable here.

- AutoConfig.from_pretrained(dir).to_dict(): config.json as a dict (the
  converter reads hparams from it; transformers would add defaults the llama
  path does not use).
- AutoTokenizer: raises, so the converter takes its SentencePiece path
  (tokenizer.model), which needs only python3-sentencepiece.
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


class AutoConfig:
    @staticmethod
    def from_pretrained(path, **kwargs):
        with open(os.path.join(str(path), "config.json"), encoding="utf-8") as f:
            return _Config(json.load(f))


class AutoTokenizer:
    @staticmethod
    def from_pretrained(*args, **kwargs):
        raise OSError("memwall bench shim: no transformers tokenizer (SentencePiece path only)")
