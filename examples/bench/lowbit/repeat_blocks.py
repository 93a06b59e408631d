#!/usr/bin/env python3
"""Benchmark files of a real shape without quantizing all of it: `shrink` keeps a GGUF v3 file's first
N blocks (and every tensor outside the blocks), `expand` makes a K-block file N blocks deep by repeating
block i % K. llama-quantize's IQ search takes ~14 min per type for all of tinyllama-1.1B on 2 cores and
~1 min for two blocks; a decoder's speed does not depend on which values its blocks hold.
usage: repeat_blocks.py shrink|expand IN OUT N   (Python 3 standard library only)"""
import struct, sys
SIZES = {0:1,1:1,2:2,3:2,4:4,5:4,6:4,7:1,10:8,11:8,12:8}  # GGUF value types with fixed size
def rd(f, fmt): return struct.unpack('<' + fmt, f.read(struct.calcsize('<' + fmt)))
def rstr(f): (n,) = rd(f, 'Q'); return f.read(n)
def rval(f, t):
    if t == 8: return rstr(f)
    if t == 9:
        (et, n) = rd(f, 'IQ'); return (et, [rval(f, et) for _ in range(n)])
    return f.read(SIZES[t])
def wval(o, t, v):
    if t == 8: o.write(struct.pack('<Q', len(v)) + v)
    elif t == 9:
        et, items = v; o.write(struct.pack('<IQ', et, len(items)))
        for x in items: wval(o, et, x)
    else: o.write(v)
mode, src, dst, N = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
f = open(src, 'rb'); assert f.read(4) == b'GGUF'
(ver, nt, nkv) = rd(f, 'IQQ')
kvs = []
for _ in range(nkv):
    k = rstr(f); (t,) = rd(f, 'I'); kvs.append([k, t, rval(f, t)])
align = 32
for k, t, v in kvs:
    if k == b'general.alignment': align = struct.unpack('<I', v)[0]
tensors = []
for _ in range(nt):
    name = rstr(f); (nd,) = rd(f, 'I'); dims = rd(f, 'Q' * nd); (ty, off) = rd(f, 'IQ')
    tensors.append([name, dims, ty, off])
data0 = (f.tell() + align - 1) // align * align
offs = sorted(set(t[3] for t in tensors))
f.seek(0, 2); end = f.tell() - data0
size = {o: (offs[i + 1] if i + 1 < len(offs) else end) - o for i, o in enumerate(offs)}
K = None
for kv in kvs:
    if kv[0].endswith(b'.block_count'):
        K = struct.unpack('<I', kv[2])[0]; kv[2] = struct.pack('<I', N)
def blk(name):
    return int(name.split(b'.')[1]) if name.startswith(b'blk.') else None
out_t = []
if mode == 'shrink':
    out_t = [t for t in tensors if blk(t[0]) is None or blk(t[0]) < N]
else:
    for t in tensors:
        if blk(t[0]) is None: out_t.append(t)
    for i in range(N):
        for t in tensors:
            b = blk(t[0])
            if b is not None and b == i % K:
                nm = b'blk.%d.' % i + t[0].split(b'.', 2)[2]
                out_t.append([nm, t[1], t[2], t[3]])
o = open(dst, 'wb')
o.write(b'GGUF' + struct.pack('<IQQ', ver, len(out_t), len(kvs)))
for k, t, v in kvs:
    o.write(struct.pack('<Q', len(k)) + k + struct.pack('<I', t)); wval(o, t, v)
pos = 0; new_off = []
for t in out_t:
    new_off.append(pos); pos = (pos + size[t[3]] + align - 1) // align * align
for t, no in zip(out_t, new_off):
    o.write(struct.pack('<Q', len(t[0])) + t[0] + struct.pack('<I', len(t[1])) + struct.pack('<' + 'Q' * len(t[1]), *t[1]) + struct.pack('<IQ', t[2], no))
o.write(b'\0' * ((-o.tell()) % align))
base = o.tell()
for t, no in zip(out_t, new_off):
    o.seek(base + no); f.seek(data0 + t[3]); o.write(f.read(size[t[3]]))
o.write(b'\0' * ((-o.tell()) % align))
print(f'{mode}: {K} -> {N} blocks, {len(out_t)} tensors')
