"""A minimal stand-in for transformers' fast tokenizer over a tokenizer.json,
for llama.cpp's convert_hf_to_gguf.py GPT-2-style vocab path (bench and
reference generation only; see __init__.py).

What the converter uses, and what this gives:
  .vocab / get_vocab()      model vocab plus the added tokens (token -> id)
  get_added_vocab()         added tokens (content -> id)
  added_tokens_decoder      id -> object with .content .special .normalized
  encode(text, add_special_tokens=True)
                            added tokens matched first (longest, leftmost),
                            the rest: NFC when the normalizer asks, the
                            Split regex of the pre-tokenizer (translated to
                            Python's re as tests/fixtures/mk_hf_fixture.py
                            does), byte-level mapping, rank-based BPE (with
                            ignore_merges); the post-processor's BOS when
                            add_special_tokens and a TemplateProcessing puts
                            one first.
  decode(ids)               byte-level inverse; added tokens as their text.
\p{M} (Qwen3.5's and o200k's regexes) and \p{Lu} \p{Ll} \p{Lt} \p{Lm} \p{Lo}
(o200k's) become their Unicode code points; a tokenizer
whose regex is Qwen3.5's is flagged memwall_pre = "qwen35" (__init__.py).
Byte-level BPE only (Qwen, Llama 3, GPT-2 layouts): a SentencePiece-style
tokenizer.json (Gemma) raises NotImplementedError, as llama.cpp has no
pre-tokenizer hash for it anyway.
"""
import json
import os
import sys
import unicodedata

_FIX = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..",
                    "tests", "fixtures")
sys.path.insert(0, os.path.abspath(_FIX))
import mk_hf_fixture as _fx  # noqa: E402  (py_regex, BYTE2U, bytes_to_unicode)

sys.path.pop(0)


# The Split regex of Qwen3.5's tokenizer.json (llama.cpp src/llama-vocab.cpp,
# LLAMA_VOCAB_PRE_TYPE_QWEN35, "original regex from tokenizer.json")
QWEN35_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?[\p{L}\p{M}]+|\p{N}|"
                r" ?[^\s\p{L}\p{M}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")


class _Added:
    def __init__(self, a):
        self.content = a["content"]
        self.special = bool(a.get("special"))
        self.normalized = bool(a.get("normalized"))


def _split_regex(pre):
    """The regex of a Split pre-tokenizer in pre (or a Sequence holding one),
    and whether a ByteLevel step with use_regex applies GPT-2's."""
    if pre is None:
        return None
    steps = pre["pretokenizers"] if pre.get("type") == "Sequence" else [pre]
    rx = None
    for st in steps:
        if st.get("type") == "Split" and "Regex" in st.get("pattern", {}):
            rx = st["pattern"]["Regex"]
        elif st.get("type") == "ByteLevel" and st.get("use_regex", True) and rx is None:
            rx = _fx.GPT2_REGEX
    return rx


class JsonTokenizer:
    def __init__(self, path):
        with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        m = tj["model"]
        if m.get("type") != "BPE" or m.get("byte_fallback"):
            raise NotImplementedError("memwall shim tokenizer: byte-level BPE tokenizer.json only")
        self._model_vocab = dict(m["vocab"])
        self.vocab = dict(self._model_vocab)
        self._added = {}
        self.added_tokens_decoder = {}
        for a in tj.get("added_tokens", []):
            self.vocab[a["content"]] = a["id"]
            self._added[a["content"]] = a["id"]
            self.added_tokens_decoder[a["id"]] = _Added(a)
        self._id2tok = {i: t for t, i in self.vocab.items()}
        merges = m.get("merges", [])
        self._ranks = {}
        for r, mg in enumerate(merges):
            pair = tuple(mg.split(" ", 1)) if isinstance(mg, str) else tuple(mg)
            self._ranks.setdefault(pair, r)
        self._ignore_merges = bool(m.get("ignore_merges"))
        norm = tj.get("normalizer")
        self._nfc = norm is not None and (
            norm.get("type") == "NFC" or
            any(n.get("type") == "NFC" for n in norm.get("normalizers", [])))
        rx = _split_regex(tj.get("pre_tokenizer"))
        # Qwen3.5's regex: llama.cpp's pre-tokenizer "qwen35" (see
        # __init__.py); its \p{M} (only inside [...]) as code points
        self.memwall_pre = "qwen35" if rx == QWEN35_REGEX else None
        if rx and r"\p{M}" in rx:
            rx = rx.replace(r"\p{M}", _fx._class_of(lambda cat: cat[0] == "M"))
        # o200k's (GPT-4o, Phi-4-mini) letter subcategories, also only
        # inside [...]: the converter finds its pre-tokenizer gpt-4o by hash
        for sub in ("Lu", "Ll", "Lt", "Lm", "Lo"):
            if rx and r"\p{%s}" % sub in rx:
                rx = rx.replace(r"\p{%s}" % sub, _fx._class_of(lambda cat, sub=sub: cat == sub))
        self._rx = _fx.py_regex(rx) if rx else None
        self._bos = None
        post = tj.get("post_processor") or {}
        posts = post.get("processors", [post]) if post.get("type") == "Sequence" else [post]
        for pp in posts:
            if pp.get("type") == "TemplateProcessing":
                first = pp.get("single", [{}])[0]
                if "SpecialToken" in first:
                    self._bos = self.vocab.get(first["SpecialToken"]["id"])
        self._u2b = {c: b for b, c in zip(_fx.BS, _fx.CS)}

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return dict(self._added)

    def _bpe_word(self, word):
        if self._ignore_merges and word in self._model_vocab:
            return [self._model_vocab[word]]
        return [self._model_vocab[p] for p in _fx.bpe_encode(word, self._ranks)]

    def _encode_plain(self, text):
        if self._nfc:
            text = unicodedata.normalize("NFC", text)
        pieces = [m.group(0) for m in self._rx.finditer(text)] if self._rx else [text]
        ids = []
        for p in pieces:
            ids.extend(self._bpe_word(_fx.BYTE2U_str(p)))
        return ids

    def encode(self, text, add_special_tokens=True, **kwargs):
        ids = []
        added = sorted(self._added, key=len, reverse=True)
        i, start = 0, 0
        while i < len(text):
            hit = None
            for a in added:
                if text.startswith(a, i):
                    hit = a
                    break
            if hit is None:
                i += 1
                continue
            if start < i:
                ids.extend(self._encode_plain(text[start:i]))
            ids.append(self._added[hit])
            i += len(hit)
            start = i
        if start < len(text):
            ids.extend(self._encode_plain(text[start:]))
        if add_special_tokens and self._bos is not None:
            ids = [self._bos] + ids
        return ids

    def decode(self, ids, **kwargs):
        out = bytearray()
        for i in ids:
            t = self._id2tok[i]
            if t in self._added and t not in self._model_vocab:
                out += t.encode("utf-8")
            else:
                out += bytes(self._u2b[c] for c in t)
        return out.decode("utf-8", errors="replace")


class SpmJsonTokenizer:
    """A SentencePiece-style tokenizer.json (BPE with byte_fallback: Gemma)
    for gguf-py's LlamaHfVocab (Gemma 4's set_vocab): the fast tokenizer's
    vocab_size (model vocab without added tokens), get_vocab (with them),
    get_added_vocab, and the special tokens of tokenizer_config.json
    (bos/eos/unk/sep/pad/cls/mask_token and additional_special_tokens), as
    transformers' all_special_tokens / all_special_ids give them. No encode:
    that path names no pre-tokenizer by hash."""
    is_fast = True

    def __init__(self, path):
        with open(os.path.join(path, "tokenizer.json"), encoding="utf-8") as f:
            tj = json.load(f)
        self.vocab = dict(tj["model"]["vocab"])
        self.vocab_size = len(self.vocab)
        self._added = {}
        self.added_tokens_decoder = {}
        for a in tj.get("added_tokens", []):
            self.vocab[a["content"]] = a["id"]
            self._added[a["content"]] = a["id"]
            self.added_tokens_decoder[a["id"]] = _Added(a)
        cfg = {}
        cp = os.path.join(path, "tokenizer_config.json")
        if os.path.isfile(cp):
            with open(cp, encoding="utf-8") as f:
                cfg = json.load(f)
        specials = []
        for k in ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token",
                  "mask_token"):
            v = cfg.get(k)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str) and v not in specials:
                specials.append(v)
        for v in cfg.get("additional_special_tokens") or []:
            v = v.get("content") if isinstance(v, dict) else v
            if v not in specials:
                specials.append(v)
        self.all_special_tokens = [t for t in specials if t in self.vocab]
        self.all_special_ids = [self.vocab[t] for t in self.all_special_tokens]
        self.memwall_pre = None

    def get_vocab(self):
        return dict(self.vocab)

    def get_added_vocab(self):
        return dict(self._added)
