"""Active messages from Python: asks the adapter whose control socket is argv[1] for an
endpoint on port argv[2] in domain argv[3], sends argv[4] messages for handler 7 (1 to
240 bytes), and checks that exactly as many replies come back, in order, marked with
handler 7, each the message with every byte XOR 0x20 (what the bundled test handler
does). Prints "replies N" and exits 0 when all came back right (10 s at most)."""

import sys
import time

import spine_endpoint


def main():
    control, port, domain, want = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    ep = spine_endpoint.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=9998,
                                domain=domain)
    msgs = [bytes((b ^ i) & 0xFF for b in range(1 + (i * 11) % spine_endpoint.MSG_MAX))
            for i in range(want)]
    try:
        ep.send_message(7, bytes(spine_endpoint.MSG_MAX + 1))
        print("a 241-byte message was accepted")
        return 1
    except ValueError:
        pass
    replies, sent, start = [], 0, time.monotonic()
    while len(replies) < want and time.monotonic() - start < 10:
        if sent < want and ep.send_message(7, msgs[sent]):
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
