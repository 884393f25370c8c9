#!/usr/bin/env python3
"""tokens_cmp.py EXPECTED.json TOKENS: the token ids in TOKENS (whitespace
separated, as llama-peer tokenize prints them) are EXPECTED.json's "ids".
Prints "  N tokens match" (exit 0) or the first difference (exit 1).
Standard library only."""
import json
import sys

if len(sys.argv) != 3:
    sys.exit(__doc__)
want = json.load(open(sys.argv[1]))["ids"]
got = [int(x) for x in open(sys.argv[2]).read().split()]
if want != got:
    i = next((i for i in range(min(len(want), len(got))) if want[i] != got[i]), min(len(want), len(got)))
    print("  first difference at %d: want %s got %s" % (i, want[i:i + 8], got[i:i + 8]))
    sys.exit(1)
print("  %d tokens match" % len(want))
