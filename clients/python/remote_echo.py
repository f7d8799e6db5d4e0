"""Active messages to another adapter, from Python: asks the adapter whose control socket
is argv[1] for an endpoint on its tunnel port argv[2], sends argv[3] message frames
(``remote_frame``) for handler 7 of the adapter at the other end, from this endpoint's
id, and checks that exactly as many replies come back to the endpoint, in order, marked
with handler 7, each the message with every byte XOR 0x20 (what the bundled test handler
does). Prints the first frame in hex ("frame0 ...") and "replies N"; exits 0 when all
came back right (10 s at most)."""

import sys
import time

import spine_endpoint as se


def main():
    control, port, want = sys.argv[1], sys.argv[2], int(sys.argv[3])
    ep = se.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=7000)
    msgs = [bytes((b ^ i) & 0xFF for b in range(1 + (i * 7) % se.MSG_MAX))
            for i in range(want)]
    frames = [se.remote_frame(7, se.REMOTE_TO_HANDLERS, ep.id, m) for m in msgs]
    print("frame0", frames[0].hex(), flush=True)
    # The builder and the parser agree, and the parser refuses what is no message.
    if se.parse_remote(frames[0]) != (7, se.REMOTE_TO_HANDLERS, ep.id, msgs[0]):
        print("a frame does not parse back")
        return 1
    for bad in (frames[0][:20], frames[0][:16] + b"\x02" + frames[0][17:]):
        try:
            se.parse_remote(bad)
            print("a malformed frame parsed")
            return 1
        except ValueError:
            pass
    replies, sent, start = [], 0, time.monotonic()
    while len(replies) < want and time.monotonic() - start < 10:
        if sent < want and ep.send(frames[sent]):
            sent += 1
        got = ep.recv_marked()
        if got is not None:
            replies.append(got)
        elif sent == want:
            ep.wait(0.05)
    ep.close()
    expected = [bytes(b ^ 0x20 for b in m) for m in msgs]
    ok = [r[0] for r in replies] == expected and all(r[1] and r[1][0] == 7 for r in replies)
    print(f"replies {len(replies)}", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
