"""Bulk messages to and from another adapter, from Python; the same two modes as
clients/c/remote_bulk.c:

``remote_bulk.py send CONTROL PORT DST_PORT``: an endpoint on tunnel port PORT (UDP to
DST_PORT) of the adapter whose control socket is CONTROL; a 3,000- and then an
8,000-byte message (byte b of message i: (b * 31 + b // 251 + i) & 0xff) written into a
reserved region of its area and sent with ``send_bulk_remote`` to handler 12 of the
handlers over there; each 24-byte answer marked with handler 12 printed as
"answer SUM MIX LEN PAST_END". Exits 0 when both came back (10 s at most).

``remote_bulk.py recv CONTROL PORT DST_PORT``: reserves 16 KiB, grants them with
``grant_area``, prints "granted ID" and waits (10 s at most) for one bulk message,
printed as "bulk HANDLER SOURCE HEX"."""

import struct
import sys
import time

import spine_endpoint as se


def main():
    mode, control, port, dst = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ep = se.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=dst)
    off = ep.reserve_area(se.REMOTE_BULK_MAX // ep.frame_size)
    if off is None:
        print("no 16 KiB of free frames")
        return 1
    start, got = time.monotonic(), 0
    if mode == "send":
        for i, size in enumerate((3000, 8000)):
            ep.write_area(off, bytes((b * 31 + b // 251 + i) & 0xFF for b in range(size)))
            while not ep.send_bulk_remote(se.REMOTE_HANDLERS, 12, off, size):
                time.sleep(0.001)
            # The area is read when the adapter takes the descriptor: wait for the
            # answer before writing the next message over it.
            while got <= i and time.monotonic() - start < 10:
                m = ep.recv_marked()
                if m is None:
                    time.sleep(0.001)
                    continue
                data, mark = m
                if len(data) != 24 or not mark or mark[0] != 12:
                    print("unexpected", data, mark)
                    return 1
                s, mix, length, past = struct.unpack("<QQIi", data)
                print(f"answer {s} {mix} {length} {past}", flush=True)
                got += 1
        want = 2
    else:
        if not ep.grant_area(off, se.REMOTE_BULK_MAX):
            return 1
        print(f"granted {ep.id}", flush=True)
        while not got and time.monotonic() - start < 10:
            m = ep.recv_marked()
            if m is None:
                time.sleep(0.001)
                continue
            data, mark = m
            if ep.last_bulk is None:
                print("unexpected", data, mark)
                return 1
            print(f"bulk {mark[0]} {mark[1]} {data.hex()}", flush=True)
            got += 1
        want = 1
    ep.close()
    return 0 if got == want else 1


if __name__ == "__main__":
    sys.exit(main())
