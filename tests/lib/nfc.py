#!/usr/bin/env python3
"""nfc.py IN OUT: OUT is IN in Unicode normalization form C (bytes that are
not UTF-8 kept as they are). Standard library only."""
import sys
import unicodedata

if len(sys.argv) != 3:
    sys.exit(__doc__)
s = open(sys.argv[1], "rb").read().decode("utf-8", "surrogateescape")
open(sys.argv[2], "wb").write(unicodedata.normalize("NFC", s).encode("utf-8", "surrogateescape"))
