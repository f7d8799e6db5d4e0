"""Bulk messages from an extension, received in Python: asks the adapter whose control
socket is argv[1] for an endpoint on port argv[2] in domain argv[3], reserves two frames of
its buffer area and asks handler 13 (the bundled test handler bulk_reply.c) for 2,000 bytes
written at an offset that crosses the frames' boundary; the handler writes them there and
sends a bulk message referring to them. Checks that exactly those bytes arrive (byte p =
p * 13 + seed), marked with handler 13, at that offset; that a reference the handler sends
past the area's end never arrives (the adapter refuses it: the next message is the answer
to the request after it); and, on a region of its own playing the adapter, that this
module refuses bulk references outside the area and reads one inside. Prints
"bulk N source S" and exits 0 when all held (10 s at most)."""

import os
import struct
import sys
import time

import spine_endpoint as se


def ask(ep, off, length, seed):
    req = struct.pack("<QIB3x", off, length, seed)
    start = time.monotonic()
    while time.monotonic() - start < 10:
        if ep.send_message(13, req):
            return
    raise TimeoutError("no room on the transmit ring")


def next_marked(ep):
    start = time.monotonic()
    while time.monotonic() - start < 10:
        got = ep.recv_marked()
        if got is not None:
            return got
        ep.wait(0.01)
    raise TimeoutError("no message")


def pattern(length, seed):
    return bytes((p * 13 + seed) & 0xFF for p in range(length))


def hostile(addr, length, options):
    """Plays the adapter on a region of its own: one receive descriptor, then what
    ``recv_marked`` answers (the exception's type name when it raises)."""
    entries, frame_size, frames = 8, 2048, 4
    ring = se._round_up(se.ENTRIES_OFF + entries * 16, 64) + entries * se.INLINE_BYTES
    area = se._round_up(se.HEADER_BYTES + 4 * ring, 4096)
    fd = os.memfd_create("spine-fake-ep")
    try:
        os.ftruncate(fd, area + frames * frame_size)
        os.pwrite(fd, struct.pack("<5I", se.MAGIC, se.VERSION, entries, frame_size, frames), 0)
        ep = se.Endpoint(fd)
        ep.mem[area + 1000 : area + 1300] = pattern(300, 9)
        rx = se.HEADER_BYTES + ring
        struct.pack_into("<QII", ep.mem, rx + se.ENTRIES_OFF, addr, length, options)
        struct.pack_into("<I", ep.mem, rx, 1)
        try:
            return ep.recv_marked(), ep.last_bulk
        except ValueError as e:
            return type(e).__name__, None
        finally:
            ep.close()
    finally:
        os.close(fd)


def main():
    control, port, domain = sys.argv[1], sys.argv[2], sys.argv[3]
    ep = se.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=9995,
                    domain=domain)
    ok = True
    at = ep.reserve_area(2)
    if at is None:
        print("no two free frames")
        return 1
    area = ep.frames * ep.frame_size
    start = at + ep.frame_size - 700
    ask(ep, start, 2000, 5)
    data, mark = next_marked(ep)
    if data != pattern(2000, 5) or mark[0] != 13 or ep.last_bulk != start:
        print(f"first bulk message wrong: {len(data)} bytes, {mark}, at {ep.last_bulk}")
        ok = False
    source = mark[1]
    # A reference past the area's end, then a good request: only the second arrives.
    ask(ep, area - 10, 11, 0xFF)
    ask(ep, at, 300, 7)
    data, mark = next_marked(ep)
    if data != pattern(300, 7) or ep.last_bulk != at:
        print(f"the message after the refused reference wrong: {len(data)} bytes")
        ok = False
    ep.release_area(at, 2)
    ep.close()
    # The module's own checks, on a region it does not share with an adapter.
    bulk = se.DESC_MESSAGE | se.DESC_BULK | 13 << 8 | 77 << 16
    refused = [hostile(4 * 2048 - 10, 11, bulk), hostile(2**64 - 5, 10, bulk),
               hostile(0, 0, bulk)]
    if any(r != ("ValueError", None) for r in refused):
        print(f"a hostile bulk descriptor was not refused: {refused}")
        ok = False
    good = hostile(1000, 300, bulk)
    if good != ((pattern(300, 9), (13, 77)), 1000):
        print(f"a good bulk descriptor was not read: {good}")
        ok = False
    print(f"bulk {2000 if ok else 0} source {source}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
