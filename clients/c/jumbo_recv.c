/* A C application that reads multi-buffer frames: asks the adapter whose control socket
 * is argv[1] for an endpoint on port argv[2] taking UDP/IPv4 to destination port argv[3]
 * with "multi_buffer": true, and prints "frame LEN FNV" (the frame's length and 32-bit
 * FNV-1a hash, in hex) for each of the argv[4] frames it receives whole
 * (spine_ep_recv_frame gathers the pieces of one longer than an area frame), 10 s at
 * most. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

static uint32_t fnv1a(const uint8_t *p, int n)
{
	uint32_t h = 2166136261u;

	for (int i = 0; i < n; i++)
		h = (h ^ p[i]) * 16777619u;
	return h;
}

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	static uint8_t buf[16384];
	struct spine_ep ep;
	int fds[2], conn, done = 0, want;
	time_t start = time(NULL);

	if (argc != 5)
		return 2;
	want = atoi(argv[4]);
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"match\":{\"ethertype\":2048,\"ip_proto\":17,\"dst_port\":%s},"
		 "\"multi_buffer\":true}",
		 argv[2], argv[3]);
	conn = spine_ep_request(argv[1], req, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	printf("open %s\n", answer);
	fflush(stdout);
	while (done < want && time(NULL) - start < 10) {
		int n = spine_ep_recv_frame(&ep, buf, sizeof(buf));

		if (n < 0) {
			printf("error %d\n", n);
			return 1;
		}
		if (n == 0) {
			struct pollfd p = { .fd = fds[1], .events = POLLIN };
			uint64_t v;

			if (poll(&p, 1, 100) > 0 && read(fds[1], &v, sizeof(v)) < 0)
				return 1;
			continue;
		}
		printf("frame %d %08x\n", n, fnv1a(buf, n));
		fflush(stdout);
		done++;
	}
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	return done == want ? 0 : 1;
}
