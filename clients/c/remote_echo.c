/* Active messages to another adapter, from C: asks the adapter whose control socket is
 * argv[1] for an endpoint on its tunnel port argv[2], sends argv[3] message frames
 * (spine_remote_frame) for handler 7 of the adapter at the other end, from this
 * endpoint's id, and checks that exactly as many replies come back, in order, marked
 * with handler 7, each the message with every byte XOR 0x20 (what the bundled test
 * handler does). Prints the first frame in hex ("frame0 ...") and "replies N"; exits 0
 * when all came back right (10 s at most). */
#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

/* Message i: 1 + (i * 7) % 240 bytes, byte b of it (b ^ i) & 0xff. */
static uint32_t message(int i, uint8_t *out)
{
	uint32_t len = 1 + (uint32_t)(i * 7) % SPINE_EP_MSG_MAX;

	for (uint32_t b = 0; b < len; b++)
		out[b] = (uint8_t)(b ^ (uint32_t)i);
	return len;
}

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	uint8_t msg[SPINE_EP_MSG_MAX], frame[SPINE_REMOTE_HEADER_LEN + SPINE_EP_MSG_MAX];
	uint8_t got[4096];
	const uint8_t *payload;
	const char *idp;
	struct spine_ep ep;
	int fds[2], conn, want, sent = 0, replies = 0, ok = 1, n;
	uint32_t id, to, from, len;
	uint8_t handler;
	time_t start = time(NULL);

	if (argc != 4)
		return 2;
	want = atoi(argv[3]);
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"match\":{\"ethertype\":2048,\"ip_proto\":17,"
		 "\"dst_port\":7000}}",
		 argv[2]);
	conn = spine_ep_request(argv[1], req, fds, answer, sizeof(answer));
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
	/* The builder and the parser agree, and refuse what they must. */
	len = message(0, msg);
	n = spine_remote_frame(frame, sizeof(frame), 7, SPINE_REMOTE_TO_HANDLERS, id, msg, len);
	printf("frame0 ");
	for (int i = 0; i < n; i++)
		printf("%02x", frame[i]);
	printf("\n");
	if (spine_remote_parse(frame, (uint32_t)n, &handler, &to, &from, &payload) != (int)len ||
	    handler != 7 || to != SPINE_REMOTE_TO_HANDLERS || from != id ||
	    memcmp(payload, msg, len) != 0) {
		printf("a frame does not parse back\n");
		return 1;
	}
	if (spine_remote_parse(frame, 20, &handler, &to, &from, &payload) != -EBADMSG ||
	    spine_remote_frame(frame, 10, 7, 0, 0, msg, len) != -EMSGSIZE) {
		printf("a malformed frame was not refused\n");
		return 1;
	}
	while (replies < want && time(NULL) - start < 10) {
		struct spine_ep_mark mark;

		if (sent < want) {
			len = message(sent, msg);
			n = spine_remote_frame(frame, sizeof(frame), 7, SPINE_REMOTE_TO_HANDLERS,
					       id, msg, len);
			if (n > 0 && spine_ep_send(&ep, frame, (uint32_t)n) == 1)
				sent++;
		}
		n = spine_ep_recv_marked(&ep, got, sizeof(got), &mark);
		if (n > 0) {
			len = message(replies, msg);
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
