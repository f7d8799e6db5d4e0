/* Active messages from C: asks the adapter whose control socket is argv[1] for an
 * endpoint on port argv[2] in domain argv[3], sends argv[4] messages for handler 7 (1 to
 * 240 bytes), and checks that exactly as many replies come back, in order, marked with
 * handler 7, each the message with every byte XOR 0x20 (what the bundled test handler
 * does). Prints "replies N" and exits 0 when all came back right (10 s at most). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

/* Message i: 1 + (i * 11) % 240 bytes, byte b of it (b ^ i) & 0xff. */
static uint32_t message(int i, uint8_t *out)
{
	uint32_t len = 1 + (uint32_t)(i * 11) % SPINE_EP_MSG_MAX;

	for (uint32_t b = 0; b < len; b++)
		out[b] = (uint8_t)(b ^ (uint32_t)i);
	return len;
}

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	uint8_t msg[SPINE_EP_MSG_MAX + 1], got[4096];
	struct spine_ep ep;
	int fds[2], conn, want, sent = 0, replies = 0, ok = 1;
	time_t start = time(NULL);

	if (argc != 5)
		return 2;
	want = atoi(argv[4]);
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"domain\":\"%s\",\"match\":{\"ethertype\":2048,"
		 "\"ip_proto\":17,\"dst_port\":9998}}",
		 argv[2], argv[3]);
	conn = spine_ep_request(argv[1], req, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	memset(msg, 0, sizeof(msg));
	if (spine_ep_send_message(&ep, 7, msg, SPINE_EP_MSG_MAX + 1) != -EMSGSIZE) {
		printf("a 241-byte message was not refused\n");
		return 1;
	}
	while (replies < want && time(NULL) - start < 10) {
		struct spine_ep_mark mark;
		int n;

		if (sent < want) {
			uint32_t len = message(sent, msg);

			if (spine_ep_send_message(&ep, 7, msg, len) == 1)
				sent++;
		}
		n = spine_ep_recv_marked(&ep, got, sizeof(got), &mark);
		if (n > 0) {
			uint32_t len = message(replies, msg);

			if ((uint32_t)n != len || !mark.message || mark.handler != 7)
				ok = 0;
			for (uint32_t b = 0; ok && b < len; b++)
				ok = got[b] == (msg[b] ^ 0x20);
			replies++;
		} else if (n < 0) {
			ok = 0;
		} else if (sent == want) {
			struct pollfd p = { .fd = fds[1], .events = POLLIN };
			uint64_t v;

			if (poll(&p, 1, 50) > 0 && read(fds[1], &v, sizeof(v)) < 0)
				return 1;
		}
	}
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	printf("replies %d\n", replies);
	return ok && replies == want ? 0 : 1;
}
