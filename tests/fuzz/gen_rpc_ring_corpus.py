#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Writes the seed corpus of fuzz_rpc_ring into tests/fuzz/corpus/rpc_ring/.

The input format is described in tests/fuzz/rpc_ring_harness.h. A file's
name starts with what its requests must all come to (an ql_rpc_err_kind
name: none, short, bad_magic, ...), or "mixed-" (at least one of several),
or "idle-" (nothing collected); test_rpc_ring_corpus checks that.

    tests/fuzz/gen_rpc_ring_corpus.py [OUTDIR]
"""
import os
import struct
import sys

MAGIC_REQ = 0x43555152


def fnv1a(name):
    h = 0x811C9DC5
    for c in name.encode():
        h = ((h ^ c) * 0x01000193) & 0xFFFFFFFF
    return h


def req(fn, args=b"", rid=7, ptp=0x1122334455667788, magic=MAGIC_REQ, arg_len=None, fid=None):
    if arg_len is None:
        arg_len = len(args)
    if fid is None:
        fid = fnv1a(fn)
    return struct.pack("<IIIIQ", magic, fid, arg_len, rid, ptp) + args


def head(slots=4, slot_size=256, raw=False, high=False, resp=7, burst=6):
    """resp: index into {0,23,24,25,40,64,slot_size,4096}; burst: into {1,2,3,4,8,16,32,64}."""
    g = {1: 0, 2: 1, 4: 2, 8: 3}[slots] | {64: 0, 128: 1, 256: 2, 512: 3}[slot_size] << 2
    f = (1 if raw else 0) | (2 if high else 0) | resp << 2 | burst << 5
    return bytes([g, f])


def rec(msg, length=None, gap=False):
    """A slot record: u16 n, then len u32 | reserved u32 | message."""
    body = struct.pack("<II", len(msg) if length is None else length, 0) + msg
    n = len(body) | (0x8000 if gap else 0)
    return struct.pack("<H", n) + body


def i32(*v):
    return struct.pack("<%di" % len(v), *v)


VALID = {
    "add": i32(2, 40),
    "parity": bytes([0xA5, 0x1C]),
    "sum_f64": b"\x03" + struct.pack("<3d", 1.5, 2.5, -1.0),
    "scale": struct.pack("<4ff", 1, 2, 3, 4, 0.5),
    "mix": struct.pack("<qI2i", -5, 9, 3, 4),
    "big": b"\x5a",
    "fail": i32(0),
    "echo": b"hello, ring",
    "counted": struct.pack("<I", 3) + b"abc",
    "spew": struct.pack("<I", 16),
}

seeds = {}
for fn, args in VALID.items():
    seeds["none-%s" % fn] = head() + rec(req(fn, args))
# every function in one ring, twice round (wrap), bursts of 3
allv = [rec(req(fn, a, rid=i)) for i, (fn, a) in enumerate(VALID.items())]
seeds["none-all-wrap"] = head(slots=4, burst=2) + b"".join(allv)
seeds["none-all-high"] = head(slots=8, high=True, burst=4) + b"".join(allv)
seeds["none-one-slot"] = head(slots=1, slot_size=64, burst=0) + b"".join(
    rec(req("add", i32(i, i))) for i in range(5))
seeds["none-resp-exact"] = head(slot_size=64, resp=6) + rec(req("add", i32(1, 2)))
# the raw form: the input writes the sequence words itself (1, 2)
slot = struct.pack("<QII", 1, 32, 0) + req("add", i32(5, 6))
seeds["none-raw"] = head(slots=2, slot_size=64, raw=True) + slot.ljust(64, b"\0") + \
    (struct.pack("<QII", 2, 32, 0) + req("echo", b"x" * 8)).ljust(64, b"\0")

seeds["short-empty"] = head() + rec(b"")
seeds["short-23"] = head() + rec(req("add", i32(1, 2))[:23])
seeds["bad_magic-response-magic"] = head() + rec(req("add", i32(1, 2), magic=0x43555153))
seeds["bad_magic-zero"] = head() + rec(bytes(32))
seeds["bad_length-huge-arg-len"] = head() + rec(req("add", i32(1, 2), arg_len=0xFFFFFFFF))
seeds["bad_length-truncated"] = head() + rec(req("add", i32(1, 2))[:28])
# len beyond the slot: the RTH hands over the slot's capacity only
seeds["bad_length-len-past-slot"] = head(slot_size=64) + rec(
    req("echo", b"y" * 24, arg_len=1000), length=0xFFFFFFFF)
seeds["unknown_function-name"] = head() + rec(req("no_such_function", i32(1)))
seeds["unknown_function-id-zero"] = head() + rec(req("", i32(1), fid=0))
seeds["args_mismatch-short"] = head() + rec(req("add", i32(1)))
seeds["args_mismatch-long"] = head() + rec(req("add", i32(1, 2, 3)))
seeds["args_mismatch-counted"] = head() + rec(req("counted", struct.pack("<I", 1000) + b"ab"))
seeds["handler_error-fail"] = head() + rec(req("fail", i32(9)))
seeds["internal-fail-negative"] = head() + rec(req("fail", i32(-3)))
seeds["result_overflow-big-small-resp"] = head(resp=5) + rec(req("big", b"\x01"))
seeds["result_overflow-spew"] = head(slot_size=64, resp=6) + rec(req("spew", struct.pack("<I", 4000)))
seeds["internal-resp-too-small"] = head(resp=1) + rec(req("add", i32(1, 2)))
seeds["internal-resp-zero"] = head(resp=0) + rec(req("add", i32(1, 2)))
# a gap: slot 1 never marked ready, so slots 1.. are not collected
seeds["none-gap"] = head() + rec(req("add", i32(1, 1))) + rec(req("add", i32(2, 2)), gap=True) + \
    rec(req("add", i32(3, 3)))
seeds["idle-no-seq"] = head() + rec(req("add", i32(1, 2)), gap=True)
seeds["idle-raw-wrong-seq"] = head(slots=1, slot_size=64, raw=True) + \
    (struct.pack("<QII", 2, 32, 0) + req("add", i32(5, 6))).ljust(64, b"\0")
seeds["mixed-everything"] = head(slots=8, slot_size=128, burst=7) + b"".join([
    rec(req("add", i32(1, 2))), rec(b"abc"), rec(req("add", i32(1, 2), magic=1)),
    rec(req("add", i32(1, 2), arg_len=99)), rec(req("nope")), rec(req("add", b"")),
    rec(req("fail", i32(4))), rec(req("echo", b"z" * 90)), rec(req("big", b"\x02")),
])

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus", "rpc_ring")
os.makedirs(out, exist_ok=True)
for name, data in sorted(seeds.items()):
    with open(os.path.join(out, name), "wb") as f:
        f.write(data)
print("%d seeds in %s" % (len(seeds), out))
