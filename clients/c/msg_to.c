/* Active messages for one named extension, from C: asks the adapter whose control socket
 * is argv[1] for an endpoint on port argv[2] in domain argv[3], looks up the ids of
 * extensions argv[4] and argv[5] (both registering handler 7, the bundled test handler
 * that replies with every byte XOR 0x20), sends 3 messages for handler 7 to the first
 * only and 2 to the second only, and checks that exactly those replies come back, each
 * marked with the id it was sent to; an unknown name is answered -ENOENT. Prints
 * "to A B" (the two ids) and exits 0 when all held (10 s at most). */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

int main(int argc, char **argv)
{
	char req[256], answer[1024];
	uint8_t got[SPINE_EP_MSG_MAX];
	struct spine_ep ep;
	int fds[2], conn, ids[2], sent = 0, replies = 0, ok = 1;
	time_t start = time(NULL);

	if (argc != 6)
		return 2;
	snprintf(req, sizeof(req),
		 "{\"port\":\"%s\",\"domain\":\"%s\",\"match\":{\"ethertype\":2048,"
		 "\"ip_proto\":17,\"dst_port\":9994}}",
		 argv[2], argv[3]);
	conn = spine_ep_request(argv[1], req, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	ids[0] = spine_ep_extension_id(argv[1], argv[4]);
	ids[1] = spine_ep_extension_id(argv[1], argv[5]);
	if (ids[0] < 0 || ids[1] < 0 || spine_ep_extension_id(argv[1], "nope") != -ENOENT ||
	    spine_ep_send_message_to(&ep, 0xffff, 7, "x", 1) != -EINVAL) {
		printf("lookups wrong: %d %d\n", ids[0], ids[1]);
		return 1;
	}
	/* Messages 0..2 for the first, 3..4 for the second; one byte each, its number. */
	while (replies < 5 && time(NULL) - start < 10) {
		struct spine_ep_mark mark;
		int n;

		if (sent < 5) {
			uint8_t b = (uint8_t)sent;

			if (spine_ep_send_message_to(&ep, (uint16_t)ids[sent < 3 ? 0 : 1], 7, &b, 1) == 1)
				sent++;
		}
		n = spine_ep_recv_marked(&ep, got, sizeof(got), &mark);
		if (n > 0) {
			int want = ids[replies < 3 ? 0 : 1];

			if (n != 1 || got[0] != (replies ^ 0x20) || mark.handler != 7 ||
			    mark.source != want)
				ok = 0;
			replies++;
		} else if (n < 0) {
			ok = 0;
		} else {
			usleep(1000);
		}
	}
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	printf("to %d %d replies %d\n", ids[0], ids[1], replies);
	return ok && replies == 5 ? 0 : 1;
}
