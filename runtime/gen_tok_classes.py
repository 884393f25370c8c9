#!/usr/bin/env python3
"""Regenerate the \\p{L} / \\p{N} / \\p{M} range tables of runtime/rt_tok_pre.c.

    gen_tok_classes.py LLAMA_CPP_SRC/src/unicode-data.cpp > tables.inc

The tables must classify code points exactly as the llama.cpp the runtime is
compared with (tests/peer: llama.cpp 80fb11ac), so they are read from that
llama.cpp's own Unicode data (unicode_ranges_flags: a start code point and
its flags per range, LETTER = 0x0004, NUMBER = 0x0002, ACCENT_MARK = 0x0010:
the \\p{M} of the qwen35 pre-tokenizer), not from Python's
unicodedata, whose Unicode version follows the Python release. The output
replaces the block between the "generated" markers in rt_tok_pre.c.
Python 3 standard library only.
"""
import re
import sys


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    src = open(argv[1], encoding="utf-8").read()
    i = src.index("unicode_ranges_flags")
    j = src.index("};", i)
    ents = [(int(a, 16), int(b, 16))
            for a, b in re.findall(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}", src[i:j])]
    if not ents or ents[0][0] != 0 or ents[-1][0] != 0x110000:
        sys.stderr.write("unexpected unicode_ranges_flags layout\n")
        return 1

    def ranges(bit):
        out = []
        for k in range(len(ents) - 1):
            lo, flags = ents[k]
            hi = ents[k + 1][0] - 1
            if flags & bit:
                if out and out[-1][1] + 1 == lo:
                    out[-1][1] = hi
                else:
                    out.append([lo, hi])
        return out

    w = sys.stdout.write
    for name, bit in (("letters", 0x4), ("numbers", 0x2), ("marks", 0x10)):
        r = ranges(bit)
        w("static const struct range %s[%d] = {\n" % (name, len(r)))
        for k in range(0, len(r), 4):
            w("   " + "".join(" {0x%X, 0x%X}," % (lo, hi) for lo, hi in r[k:k + 4]) + "\n")
        w("};\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
