/* A C application on a running adapter: asks the adapter whose control socket is argv[1]
 * for an endpoint on port argv[2] taking UDP/IPv4 to destination port argv[3], and sends
 * back every frame it receives (out of the same port) until argv[4] have gone back (10 s
 * at most). First checks that a bad tag is refused with a clear error. */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	static uint8_t buf[4096];
	struct spine_ep ep;
	int fds[2], conn, done = 0, want;
	time_t start = time(NULL);

	if (argc != 5)
		return 2;
	want = atoi(argv[4]);
	snprintf(req, sizeof(req), "{\"port\":\"%s\",\"match\":{\"dst_port\":%s}}", argv[2], argv[3]);
	if (spine_ep_request(argv[1], req, fds, answer, sizeof(answer)) != -EPERM ||
	    !strstr(answer, "\"bad_tag\"")) {
		printf("a tag without ip_proto was not refused as bad_tag: %s\n", answer);
		return 1;
	}
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"match\":{\"ethertype\":2048,\"ip_proto\":17,\"dst_port\":%s}}",
		 argv[2], argv[3]);
	conn = spine_ep_request(argv[1], req, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	printf("open %s\n", answer);
	fflush(stdout);
	while (done < want && time(NULL) - start < 10) {
		int n = spine_ep_recv(&ep, buf, sizeof(buf));

		if (n <= 0) {
			struct pollfd p = { .fd = fds[1], .events = POLLIN };
			uint64_t v;

			if (poll(&p, 1, 100) > 0 && read(fds[1], &v, sizeof(v)) < 0)
				return 1;
			continue;
		}
		while (spine_ep_send(&ep, buf, (uint32_t)n) == 0)
			;
		done++;
	}
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	printf("echoed %d\n", done);
	return done == want ? 0 : 1;
}
