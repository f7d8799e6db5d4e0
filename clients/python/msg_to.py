"""Active messages for one named extension, from Python: asks the adapter whose control
socket is argv[1] for an endpoint on port argv[2] in domain argv[3], looks up the ids of
extensions argv[4] and argv[5] (both registering handler 7, the bundled test handler that
replies with every byte XOR 0x20), sends 3 messages for handler 7 to the first only and 2
to the second only, and checks that exactly those replies come back, each marked with the
id it was sent to; an unknown name is refused ``no_extension``. Prints "to A B replies N"
and exits 0 when all held (10 s at most)."""

import sys
import time

import spine_endpoint as se


def main():
    control, port, domain, first, second = sys.argv[1:6]
    ep = se.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=9993,
                    domain=domain)
    ids = [se.extension(control, first)["id"], se.extension(control, second)["id"]]
    try:
        se.extension(control, "nope")
        print("an unknown extension was named")
        return 1
    except se.Refused as e:
        if e.kind != "no_extension":
            print(f"refused as {e.kind}")
            return 1
    replies, sent, start = [], 0, time.monotonic()
    while len(replies) < 5 and time.monotonic() - start < 10:
        if sent < 5 and ep.send_message(7, bytes([sent]), ext=ids[0 if sent < 3 else 1]):
            sent += 1
        got = ep.recv_marked()
        if got is not None:
            replies.append(got)
        else:
            ep.wait(0.01)
    ep.close()
    want = [(bytes([i ^ 0x20]), (7, ids[0 if i < 3 else 1])) for i in range(5)]
    print(f"to {ids[0]} {ids[1]} replies {len(replies)}", flush=True)
    return 0 if replies == want else 1


if __name__ == "__main__":
    sys.exit(main())
