"""A Python application on a spine endpoint: receives the endpoint over the Unix socket in
argv[1] and sends back every message reversed until argv[2] have gone back (10 s at most)."""

import sys
import time

import spine_endpoint


def main():
    path, want = sys.argv[1], int(sys.argv[2])
    ep = spine_endpoint.connect(path)
    done, start = 0, time.monotonic()
    while done < want and time.monotonic() - start < 10:
        msg = ep.recv()
        if msg is None:
            ep.wait(0.1)
            continue
        while not ep.send(msg[::-1]):
            time.sleep(0.0001)
        done += 1
    ep.close()
    print(f"echoed {done}")
    return 0 if done == want else 1


if __name__ == "__main__":
    sys.exit(main())
