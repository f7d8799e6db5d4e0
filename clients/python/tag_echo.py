"""A Python application on a running adapter: asks the adapter whose control socket is
argv[1] for an endpoint on port argv[2] taking UDP/IPv4 to destination port argv[3], and
sends back every frame it receives (out of the same port) until argv[4] have gone back
(10 s at most). First checks that a bad tag is refused with a clear error."""

import sys
import time

import spine_endpoint


def main():
    control, port, dport, want = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    try:
        spine_endpoint.open_on(control, port, dst_port=dport)
        print("a tag without ip_proto was accepted")
        return 1
    except spine_endpoint.Refused as e:
        if e.kind != "bad_tag":
            print(f"refused with {e.kind}, not bad_tag")
            return 1
    ep = spine_endpoint.open_on(control, port, ethertype=0x0800, ip_proto=17, dst_port=dport)
    print(f"open {ep.id}", flush=True)
    done, start = 0, time.monotonic()
    while done < want and time.monotonic() - start < 10:
        msg = ep.recv()
        if msg is None:
            ep.wait(0.1)
            continue
        while not ep.send(msg):
            time.sleep(0.0001)
        done += 1
    ep.close()
    print(f"echoed {done}", flush=True)
    return 0 if done == want else 1


if __name__ == "__main__":
    sys.exit(main())
