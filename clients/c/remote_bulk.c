/* Bulk messages to and from another adapter, from C. Two modes:
 *
 *   remote_bulk send CONTROL PORT DST_PORT: asks the adapter whose control socket is
 *   CONTROL for an endpoint on its tunnel port PORT (UDP to DST_PORT), writes a 3,000-
 *   and then an 8,000-byte message into a reserved region of its area (byte b of message
 *   i: (b * 31 + b / 251 + i) & 0xff) and sends each with spine_ep_send_bulk_remote to
 *   handler 12 of the handlers over there; prints each 24-byte answer that comes back
 *   marked with handler 12 as "answer SUM MIX LEN PAST_END" (what the test handler
 *   bulk_sum.c computes). Exits 0 when both came back (10 s at most).
 *
 *   remote_bulk recv CONTROL PORT DST_PORT: as above for the endpoint, reserves 16 KiB,
 *   grants them with spine_ep_grant_area, prints "granted ID" (its endpoint id) and waits
 *   (10 s at most) for one bulk message, printed as "bulk HANDLER SOURCE HEX". */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

static uint8_t buf[SPINE_REMOTE_BULK_MAX];

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	const char *idp;
	struct spine_ep ep;
	int fds[2], conn, send_mode, got = 0, want, n;
	uint64_t off;
	uint32_t id, frames;
	time_t start = time(NULL);

	if (argc != 5)
		return 2;
	send_mode = strcmp(argv[1], "send") == 0;
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"match\":{\"ethertype\":2048,\"ip_proto\":17,"
		 "\"dst_port\":%d}}",
		 argv[3], atoi(argv[4]));
	conn = spine_ep_request(argv[2], req, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	idp = strstr(answer, "\"id\":");
	if (!idp) {
		printf("no endpoint id in %s\n", answer);
		return 1;
	}
	id = (uint32_t)strtoul(idp + 5, NULL, 10);
	frames = SPINE_REMOTE_BULK_MAX / ep.frame_size;
	if (!spine_ep_reserve_area(&ep, frames, &off)) {
		printf("no 16 KiB of free frames\n");
		return 1;
	}
	want = send_mode ? 2 : 1;
	if (send_mode) {
		const uint32_t sizes[2] = { 3000, 8000 };

		for (int i = 0; i < 2; i++) {
			for (uint32_t b = 0; b < sizes[i]; b++)
				buf[b] = (uint8_t)(b * 31 + b / 251 + (uint32_t)i);
			if (spine_ep_write_area(&ep, off, buf, sizes[i]) != 0)
				return 1;
			/* The area is read when the adapter takes the descriptor: wait for the
			 * answer before writing the next message over it. */
			while (spine_ep_send_bulk_remote(&ep, SPINE_EP_REMOTE_HANDLERS, 12, off,
							 sizes[i]) != 1)
				usleep(1000);
			while (got <= i && time(NULL) - start < 10) {
				struct spine_ep_mark mark;

				n = spine_ep_recv_marked(&ep, buf, sizeof(buf), &mark);
				if (n == 24 && mark.message && mark.handler == 12) {
					uint64_t sum, mix;
					uint32_t len;
					int32_t past;

					memcpy(&sum, buf, 8);
					memcpy(&mix, buf + 8, 8);
					memcpy(&len, buf + 16, 4);
					memcpy(&past, buf + 20, 4);
					printf("answer %llu %llu %u %d\n", (unsigned long long)sum,
					       (unsigned long long)mix, len, past);
					got++;
				} else if (n == 0) {
					usleep(1000);
				} else {
					printf("unexpected %d\n", n);
					return 1;
				}
			}
		}
	} else {
		if (spine_ep_grant_area(&ep, off, SPINE_REMOTE_BULK_MAX) != 1)
			return 1;
		printf("granted %u\n", id);
		fflush(stdout);
		while (!got && time(NULL) - start < 10) {
			struct spine_ep_mark mark;

			n = spine_ep_recv_marked(&ep, buf, sizeof(buf), &mark);
			if (n > 0 && mark.bulk) {
				printf("bulk %u %u ", mark.handler, mark.source);
				for (int b = 0; b < n; b++)
					printf("%02x", buf[b]);
				printf("\n");
				got++;
			} else if (n == 0) {
				usleep(1000);
			} else {
				printf("unexpected %d\n", n);
				return 1;
			}
		}
	}
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	return got == want ? 0 : 1;
}
