/* A C application on a spine endpoint: connects to the Unix socket in argv[1], receives
 * the endpoint's fds, and sends back every message it receives with its bytes reversed,
 * until argv[2] messages have gone back (or 10 s pass). Sleeps on the eventfd when idle. */
#include "spine_endpoint.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct spine_ep ep;
	int fds[2], n, sock, want, done = 0;
	uint8_t buf[65536], out[65536];
	time_t start = time(NULL);

	if (argc != 3)
		return 2;
	want = atoi(argv[2]);
	sock = socket(AF_UNIX, SOCK_STREAM, 0);
	strncpy(sa.sun_path, argv[1], sizeof(sa.sun_path) - 1);
	if (sock < 0 || connect(sock, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("connect");
		return 1;
	}
	n = spine_ep_recv_fds(sock, fds, 2);
	if (n != 2) {
		fprintf(stderr, "recv_fds: %d\n", n);
		return 1;
	}
	if ((n = spine_ep_open(&ep, fds[0])) != 0) {
		fprintf(stderr, "open: %s\n", strerror(-n));
		return 1;
	}
	while (done < want && time(NULL) - start < 10) {
		int len = spine_ep_recv(&ep, buf, sizeof(buf));

		if (len < 0) {
			fprintf(stderr, "recv: %s\n", strerror(-len));
			return 1;
		}
		if (len == 0) {
			struct pollfd p = { .fd = fds[1], .events = POLLIN };
			uint64_t count;

			if (poll(&p, 1, 100) > 0 && read(fds[1], &count, 8) < 0)
				return 1;
			continue;
		}
		for (int i = 0; i < len; i++)
			out[i] = buf[len - 1 - i];
		while ((n = spine_ep_send(&ep, out, len)) == 0)
			usleep(100);
		if (n < 0) {
			fprintf(stderr, "send: %s\n", strerror(-n));
			return 1;
		}
		done++;
	}
	spine_ep_close(&ep);
	printf("echoed %d\n", done);
	return done == want ? 0 : 1;
}
