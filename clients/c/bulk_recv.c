/* Bulk messages from an extension, received in C: asks the adapter whose control socket is
 * argv[1] for an endpoint on port argv[2] in domain argv[3], reserves two frames of its
 * buffer area and asks handler 13 (the bundled test handler bulk_reply.c) for 2,000 bytes
 * written at an offset that crosses the frames' boundary; the handler writes them there and
 * sends a bulk message referring to them. Checks that exactly those bytes arrive (byte p =
 * p * 13 + seed), marked bulk, handler 13, at that offset; that a reference the handler
 * sends past the area's end never arrives (the adapter refuses it: the next message is the
 * answer to the request after it); and, on a region of its own playing the adapter, that
 * this library refuses bulk references outside the area (-EBADMSG) and reads one inside.
 * Prints "bulk N source S" and exits 0 when all held (10 s at most). */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "spine_endpoint.h"

struct req {
	uint64_t off;
	uint32_t len;
	uint8_t seed, pad[3];
};

static int ask(struct spine_ep *ep, uint64_t off, uint32_t len, uint8_t seed)
{
	struct req r = { .off = off, .len = len, .seed = seed };
	time_t start = time(NULL);

	while (time(NULL) - start < 10)
		if (spine_ep_send_message(ep, 13, &r, sizeof(r)) == 1)
			return 1;
	return 0;
}

static int next(struct spine_ep *ep, uint8_t *buf, uint32_t cap, struct spine_ep_mark *mark)
{
	time_t start = time(NULL);

	while (time(NULL) - start < 10) {
		int n = spine_ep_recv_marked(ep, buf, cap, mark);

		if (n != 0)
			return n;
		usleep(1000);
	}
	return 0;
}

static int bytes_ok(const uint8_t *got, uint32_t len, uint8_t seed)
{
	for (uint32_t p = 0; p < len; p++)
		if (got[p] != (uint8_t)(p * 13 + seed))
			return 0;
	return 1;
}

/* Plays the adapter on a region of its own: one receive descriptor (addr, len, options),
 * then what spine_ep_recv_marked answers. */
static int hostile(uint64_t addr, uint32_t len, uint32_t options, struct spine_ep_mark *mark,
		   uint8_t *buf, uint32_t cap)
{
	uint32_t entries = 8, frame_size = 2048, frames = 4;
	uint32_t head[5] = { 0x50455053u, 2, entries, frame_size, frames };
	size_t ring = ((128 + entries * 16 + 63) / 64) * 64 + entries * 64;
	size_t total = ((4096 + 4 * ring + 4095) / 4096) * 4096 + frames * frame_size;
	struct spine_ep ep;
	uint64_t word = len | (uint64_t)options << 32;
	int fd = memfd_create("spine-fake-ep", MFD_CLOEXEC), ret;
	uint32_t one = 1;

	if (fd < 0 || ftruncate(fd, (off_t)total) != 0 || pwrite(fd, head, sizeof(head), 0) < 0)
		return -1000;
	if (spine_ep_open(&ep, fd) != 0)
		return -1001;
	for (uint32_t p = 0; p < 300; p++)
		ep.area[1000 + p] = (uint8_t)(p * 13 + 9);
	memcpy(ep.rx.base + 128, &addr, 8);
	memcpy(ep.rx.base + 136, &word, 8);
	__atomic_store_n((uint32_t *)ep.rx.base, one, __ATOMIC_RELEASE);
	ret = spine_ep_recv_marked(&ep, buf, cap, mark);
	spine_ep_close(&ep);
	close(fd);
	return ret;
}

int main(int argc, char **argv)
{
	char reqs[256], answer[1024];
	static uint8_t got[8192];
	struct spine_ep ep;
	struct spine_ep_mark mark;
	uint64_t at, start, area;
	uint32_t bulk = SPINE_EP_DESC_MESSAGE | SPINE_EP_DESC_BULK | 13u << 8 | 77u << 16;
	int fds[2], conn, n, ok = 1;
	uint16_t source;

	if (argc != 4)
		return 2;
	snprintf(reqs, sizeof(reqs),
		 "{\"port\":\"%s\",\"domain\":\"%s\",\"match\":{\"ethertype\":2048,"
		 "\"ip_proto\":17,\"dst_port\":9996}}",
		 argv[2], argv[3]);
	conn = spine_ep_request(argv[1], reqs, fds, answer, sizeof(answer));
	if (conn < 0 || spine_ep_open(&ep, fds[0]) != 0) {
		printf("no endpoint: %d %s\n", conn, answer);
		return 1;
	}
	area = (uint64_t)ep.frames * ep.frame_size;
	if (!spine_ep_reserve_area(&ep, 2, &at)) {
		printf("no two free frames\n");
		return 1;
	}
	start = at + ep.frame_size - 700;
	if (!ask(&ep, start, 2000, 5))
		return 1;
	n = next(&ep, got, sizeof(got), &mark);
	if (n != 2000 || !mark.message || !mark.bulk || mark.handler != 13 ||
	    mark.addr != start || !bytes_ok(got, 2000, 5)) {
		printf("first bulk message wrong: %d bulk %d handler %u at %llu\n", n, mark.bulk,
		       mark.handler, (unsigned long long)mark.addr);
		ok = 0;
	}
	source = mark.source;
	/* A reference past the area's end, then a good request: only the second arrives. */
	if (!ask(&ep, area - 10, 11, 0xff) || !ask(&ep, at, 300, 7))
		return 1;
	n = next(&ep, got, sizeof(got), &mark);
	if (n != 300 || !mark.bulk || mark.addr != at || !bytes_ok(got, 300, 7)) {
		printf("the message after the refused reference wrong: %d\n", n);
		ok = 0;
	}
	/* The library's own checks, on a region it does not share with an adapter. */
	if (hostile(4 * 2048 - 10, 11, bulk, &mark, got, sizeof(got)) != -EBADMSG ||
	    hostile(UINT64_MAX - 4, 10, bulk, &mark, got, sizeof(got)) != -EBADMSG ||
	    hostile(0, 0, bulk, &mark, got, sizeof(got)) != -EBADMSG ||
	    hostile(1000, 300, bulk | SPINE_EP_DESC_INLINE, &mark, got, sizeof(got)) != -EBADMSG ||
	    hostile(1000, 300, bulk, &mark, got, 299) != -EMSGSIZE) {
		printf("a hostile bulk descriptor was not refused\n");
		ok = 0;
	}
	memset(&mark, 0, sizeof(mark));
	if (hostile(1000, 300, bulk, &mark, got, sizeof(got)) != 300 || !bytes_ok(got, 300, 9) ||
	    !mark.bulk || mark.handler != 13 || mark.source != 77 || mark.addr != 1000) {
		printf("a good bulk descriptor was not read\n");
		ok = 0;
	}
	spine_ep_release_area(&ep, at, 2);
	spine_ep_close(&ep);
	close(fds[0]);
	close(fds[1]);
	close(conn);
	printf("bulk %d source %u\n", ok ? 2000 : 0, source);
	return ok ? 0 : 1;
}
