"""A Python application that reads multi-buffer frames: asks the adapter whose control
socket is argv[1] for an endpoint on port argv[2] taking UDP/IPv4 to destination port
argv[3] with ``multi_buffer=True``, and prints "frame LEN FNV" (the frame's length and
32-bit FNV-1a hash, in hex) for each of the argv[4] frames it receives whole
(``recv_frame`` gathers the pieces of one longer than an area frame), 10 s at most."""

import sys
import time

import spine_endpoint


def fnv1a(data):
    h = 2166136261
    for b in data:
        h = ((h ^ b) * 16777619) & 0xFFFFFFFF
    return h


def main():
    control, port, dport, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    ep = spine_endpoint.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=dport,
                                multi_buffer=True)
    print(f"open {ep.id}", flush=True)
    done, start = 0, time.monotonic()
    while done < want and time.monotonic() - start < 10:
        frame = ep.recv_frame()
        if frame is None:
            ep.wait(0.1)
            continue
        print(f"frame {len(frame)} {fnv1a(frame):08x}", flush=True)
        done += 1
    ep.close()
    return 0 if done == want else 1


if __name__ == "__main__":
    sys.exit(main())
