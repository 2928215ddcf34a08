#!/usr/bin/env python3
"""Cuts a scheduler recording (`slowlab record --backend bpf`, SLSCHED) down to a fuzz
seed of a few kilobytes that still has every kind of record and section it had: the first
few records of each kind, the stacks they name (their first frames), the threads and the
mappings of the processes they name, and the COMMAND, SAMPLES and END sections.

    fuzz/seeds/trim_sched.py RECORDING SEED [PER_KIND]

It reads only the layout (crates/bpf/src/sched/format.rs); it does not check the records'
meaning, and writes nothing but SEED.
"""
import struct
import sys

MAGIC = b"SLSCHED\x01"
HEADER_LEN = 24
RECORD_LEN = 32
EXTRA = {5: 16, 7: 16, 11: 8, 12: 16, 13: 48}  # kind -> bytes after the record's head
NO_STACKS = {8, 9, 10, 14}  # SYS_ENTER, SYS_EXIT, BLOCK carry a value there; PATH a flag
TAG_EVENTS, TAG_THREAD, TAG_MAPS, TAG_STACK = 1, 2, 3, 4


def record_len(kind, b):
    if kind == 14:
        return RECORD_LEN + (b + 7) // 8 * 8
    return RECORD_LEN + EXTRA.get(kind, 0)


def sections(data):
    at = len(MAGIC) + HEADER_LEN
    while at + 8 <= len(data):
        tag, n = struct.unpack_from("<II", data, at)
        yield tag, data[at + 8 : at + 8 + n]
        at += 8 + n


def records(body):
    i = 0
    while i + RECORD_LEN <= len(body):
        b = struct.unpack_from("<I", body, i + 16)[0]
        kind = body[i + 22]
        n = record_len(kind, b)
        yield body[i : i + n]
        i += n


def main():
    src, dst = sys.argv[1], sys.argv[2]
    per_kind = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    data = open(src, "rb").read()
    assert data.startswith(MAGIC), "not an SLSCHED recording"
    kept, seen, stacks, pids = [], {}, set(), set()
    for tag, body in sections(data):
        if tag != TAG_EVENTS:
            continue
        for r in records(body):
            kind = r[22]
            if seen.get(kind, 0) >= per_kind:
                continue
            seen[kind] = seen.get(kind, 0) + 1
            kept.append(r)
            tid, a = struct.unpack_from("<II", r, 8)
            pids.update((tid, a))
            if kind not in NO_STACKS:
                k, u = struct.unpack_from("<ii", r, 24)
                stacks.update({(k, 1), (u, 0)})
    out = bytearray(data[: len(MAGIC) + HEADER_LEN])

    def section(tag, body):
        out.extend(struct.pack("<II", tag, len(body)))
        out.extend(body)

    section(TAG_EVENTS, b"".join(kept))
    threads = maps = 0
    for tag, body in sections(data):
        if tag == TAG_EVENTS:
            continue
        if tag == TAG_STACK:
            sid, kernel = struct.unpack_from("<IB", body, 0)
            if (sid, kernel) in stacks:
                section(tag, body[:5] + body[5 : 5 + 8 * 6])
        elif tag == TAG_THREAD:
            pid, tid = struct.unpack_from("<II", body, 0)
            if (pid in pids or tid in pids) and threads < 8:
                threads += 1
                section(tag, body)
        elif tag == TAG_MAPS:
            if struct.unpack_from("<I", body, 0)[0] in pids and maps < 4:
                maps += 1
                lines = body[4:].split(b"\n")[:4]
                section(tag, body[:4] + b"\n".join(lines) + b"\n")
        else:
            section(tag, body)
    open(dst, "wb").write(out)
    print(f"{dst}: {len(out)} bytes, {len(kept)} records of {len(seen)} kinds")


main()
