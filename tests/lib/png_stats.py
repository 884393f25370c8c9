#!/usr/bin/env python3
"""png_stats.py PNG [--min-colours N] [--min-ink F] [--width W]

Reads a PNG (8-bit RGB or RGBA, not interlaced: what Chromium's
--screenshot writes) with the standard library only (zlib), and prints
"width W height H colours N ink F": its size, the number of distinct pixel
colours and the fraction of pixels that are not near-white. Exit 1 when a
given bound fails (fewer colours, less ink, another width): a blank or
one-colour screenshot fails --min-colours / --min-ink.
"""
import struct
import sys
import zlib


def read_png(path):
    with open(path, 'rb') as f:
        data = f.read()
    if data[:8] != b'\x89PNG\r\n\x1a\n':
        raise ValueError('not a PNG')
    pos, idat, hdr = 8, [], None
    while pos + 8 <= len(data):
        n, kind = struct.unpack('>I4s', data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        if kind == b'IHDR':
            hdr = struct.unpack('>IIBBBBB', body)
        elif kind == b'IDAT':
            idat.append(body)
        elif kind == b'IEND':
            break
        pos += 12 + n
    if not hdr:
        raise ValueError('no IHDR')
    w, h, depth, ctype, _, _, interlace = hdr
    if depth != 8 or ctype not in (2, 6) or interlace:
        raise ValueError('unsupported PNG: depth %d colour type %d interlace %d'
                         % (depth, ctype, interlace))
    return w, h, 3 if ctype == 2 else 4, zlib.decompress(b''.join(idat))


def unfilter(w, h, bpp, raw):
    """The rows, PNG filters undone (RFC 2083 6.3)."""
    stride = w * bpp
    prev = bytearray(stride)
    rows = []
    pos = 0
    for _ in range(h):
        ft = raw[pos]
        cur = bytearray(raw[pos + 1:pos + 1 + stride])
        pos += 1 + stride
        if ft == 1:
            for i in range(bpp, stride):
                cur[i] = (cur[i] + cur[i - bpp]) & 255
        elif ft == 2:
            cur = bytearray((a + b) & 255 for a, b in zip(cur, prev))
        elif ft == 3:
            for i in range(stride):
                left = cur[i - bpp] if i >= bpp else 0
                cur[i] = (cur[i] + ((left + prev[i]) >> 1)) & 255
        elif ft == 4:
            for i in range(stride):
                a = cur[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pr = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                cur[i] = (cur[i] + pr) & 255
        elif ft != 0:
            raise ValueError('bad filter %d' % ft)
        rows.append(bytes(cur))
        prev = cur
    return rows


def main(argv):
    if len(argv) < 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    path, args = argv[1], argv[2:]
    want = {}
    for i in range(0, len(args) - 1, 2):
        want[args[i]] = float(args[i + 1])
    w, h, bpp, raw = read_png(path)
    colours, ink, n = set(), 0, 0
    for row in unfilter(w, h, bpp, raw):
        for x in range(0, w * bpp, bpp):
            px = row[x:x + 3]
            colours.add(px)
            n += 1
            if px[0] < 235 or px[1] < 235 or px[2] < 235:
                ink += 1
    frac = ink / n if n else 0.0
    print('width %d height %d colours %d ink %.4f' % (w, h, len(colours), frac))
    ok = True
    if '--min-colours' in want and len(colours) < want['--min-colours']:
        print('FAIL: %d colours, want at least %d' % (len(colours), want['--min-colours']))
        ok = False
    if '--min-ink' in want and frac < want['--min-ink']:
        print('FAIL: ink %.4f, want at least %.4f' % (frac, want['--min-ink']))
        ok = False
    if '--width' in want and w != int(want['--width']):
        print('FAIL: width %d, want %d' % (w, int(want['--width'])))
        ok = False
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv))
