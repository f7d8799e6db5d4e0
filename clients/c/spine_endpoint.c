/* The client side of a spine endpoint; see spine_endpoint.h. The layout follows
 * crates/spine-endpoint/src/layout.rs: a 4096-byte header (magic "SPEP", version 2,
 * ring entries, frame size, frames), then the transmit, receive, fill and completion
 * rings (each 128 bytes of indices, `entries` 16-byte slots, then from the next 64-byte
 * boundary `entries` 64-byte inline slots), then the page-aligned buffer area. */
#include "spine_endpoint.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define SPINE_EP_MAGIC 0x50455053u
#define SPINE_EP_VERSION 2u
#define HEADER_BYTES 4096u
#define CONSUMER_OFF 64u
#define ENTRIES_OFF 128u

static uint32_t load_acquire(const uint8_t *p)
{
	return __atomic_load_n((const uint32_t *)p, __ATOMIC_ACQUIRE);
}

static void store_release(uint8_t *p, uint32_t v)
{
	__atomic_store_n((uint32_t *)p, v, __ATOMIC_RELEASE);
}

static int pow2_in(uint32_t v, uint32_t lo, uint32_t hi)
{
	return v >= lo && v <= hi && (v & (v - 1)) == 0;
}

static size_t round_up(size_t v, size_t to)
{
	return (v + to - 1) / to * to;
}

/* Producer: free slots; consumer: entries ready; -1 when the other side's index is
 * impossible. */
static int64_t ring_ready(const struct spine_ep_ring *r)
{
	uint32_t other = load_acquire(r->base + (r->producer ? CONSUMER_OFF : 0));

	if (r->producer) {
		uint32_t used = r->local - other;
		return used <= r->entries ? (int64_t)(r->entries - used) : -1;
	}
	uint32_t n = other - r->local;
	return n <= r->entries ? (int64_t)n : -1;
}

static uint8_t *ring_slot(const struct spine_ep_ring *r)
{
	return r->base + ENTRIES_OFF + (size_t)(r->local & (r->entries - 1)) * r->entry_bytes;
}

static uint8_t *ring_inline(const struct spine_ep_ring *r)
{
	return r->inline_slots + (size_t)(r->local & (r->entries - 1)) * SPINE_EP_INLINE_BYTES;
}

static void ring_advance(struct spine_ep_ring *r)
{
	r->local++;
	store_release(r->base + (r->producer ? 0 : CONSUMER_OFF), r->local);
}

static void ring_init(struct spine_ep_ring *r, uint8_t *base, uint32_t entries,
		      uint32_t entry_bytes, int producer)
{
	r->base = base;
	r->inline_slots = base + round_up(ENTRIES_OFF + (size_t)entries * 16, 64);
	r->entries = entries;
	r->entry_bytes = entry_bytes;
	r->local = 0;
	r->producer = producer;
}

static int refill_one(struct spine_ep *ep)
{
	uint64_t addr;

	if (ep->nfree == 0 || ring_ready(&ep->fill) <= 0)
		return 0;
	addr = ep->free_frames[--ep->nfree];
	memcpy(ring_slot(&ep->fill), &addr, 8);
	ring_advance(&ep->fill);
	return 1;
}

int spine_ep_open(struct spine_ep *ep, int memfd)
{
	struct stat st;
	uint32_t h[5];
	size_t ring_bytes, area_off;
	uint8_t *region;

	memset(ep, 0, sizeof(*ep));
	if (fstat(memfd, &st) != 0)
		return -errno;
	if ((size_t)st.st_size < HEADER_BYTES)
		return -EINVAL;
	region = mmap(NULL, st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
	if (region == MAP_FAILED)
		return -errno;
	for (int i = 0; i < 5; i++)
		h[i] = load_acquire(region + 4 * i);
	ring_bytes = round_up(ENTRIES_OFF + (size_t)h[2] * 16, 64) +
		     (size_t)h[2] * SPINE_EP_INLINE_BYTES;
	area_off = round_up(HEADER_BYTES + 4 * ring_bytes, 4096);
	if (h[0] != SPINE_EP_MAGIC || h[1] != SPINE_EP_VERSION || !pow2_in(h[2], 2, 1u << 16) ||
	    !pow2_in(h[3], 64, 1u << 16) || h[4] == 0 ||
	    (uint64_t)h[4] * h[3] > (1ull << 31) ||
	    area_off + (size_t)h[4] * h[3] > (size_t)st.st_size) {
		munmap(region, st.st_size);
		return -EINVAL;
	}
	ep->region = region;
	ep->len = st.st_size;
	ep->ring_entries = h[2];
	ep->frame_size = h[3];
	ep->frames = h[4];
	ep->area = region + area_off;
	ring_init(&ep->tx, region + HEADER_BYTES, h[2], 16, 1);
	ring_init(&ep->rx, region + HEADER_BYTES + ring_bytes, h[2], 16, 0);
	ring_init(&ep->fill, region + HEADER_BYTES + 2 * ring_bytes, h[2], 8, 1);
	ring_init(&ep->comp, region + HEADER_BYTES + 3 * ring_bytes, h[2], 8, 0);
	ep->free_frames = calloc(h[4], sizeof(uint64_t));
	if (!ep->free_frames) {
		munmap(region, st.st_size);
		return -ENOMEM;
	}
	for (uint32_t f = 0; f < h[4]; f++)
		ep->free_frames[ep->nfree++] = (uint64_t)f * h[3];
	for (uint32_t i = 0; i < (h[4] / 2 ? h[4] / 2 : 1); i++)
		refill_one(ep);
	return 0;
}

/* Takes back the frames the adapter finished sending; a frame address that is no frame
 * of this endpoint is ignored. */
static void reclaim(struct spine_ep *ep)
{
	int64_t n = ring_ready(&ep->comp);

	for (int64_t i = 0; i < n; i++) {
		uint64_t addr;

		memcpy(&addr, ring_slot(&ep->comp), 8);
		ring_advance(&ep->comp);
		addr -= addr % ep->frame_size;
		if (addr < (uint64_t)ep->frames * ep->frame_size && ep->nfree < ep->frames)
			ep->free_frames[ep->nfree++] = addr;
	}
}

/* Posts a copy of `len` bytes with the descriptor options `extra` (0 for a frame). */
static int send_with(struct spine_ep *ep, const void *data, uint32_t len, uint32_t extra)
{
	uint64_t addr, len64 = len | (uint64_t)extra << 32;
	uint8_t *slot;

	if (len > ep->frame_size)
		return -EMSGSIZE;
	reclaim(ep);
	if (ring_ready(&ep->tx) <= 0)
		return 0;
	if (len <= SPINE_EP_INLINE_BYTES) {
		addr = 0;
		len64 |= (uint64_t)SPINE_EP_DESC_INLINE << 32;
		memcpy(ring_inline(&ep->tx), data, len);
	} else {
		if (ep->nfree == 0)
			return 0;
		addr = ep->free_frames[--ep->nfree];
		memcpy(ep->area + addr, data, len);
	}
	slot = ring_slot(&ep->tx);
	memcpy(slot, &addr, 8);
	memcpy(slot + 8, &len64, 8); /* len, then options */
	ring_advance(&ep->tx);
	return 1;
}

int spine_ep_send(struct spine_ep *ep, const void *data, uint32_t len)
{
	return send_with(ep, data, len, 0);
}

int spine_ep_send_message(struct spine_ep *ep, uint8_t handler, const void *data,
			  uint32_t len)
{
	if (len > SPINE_EP_MSG_MAX)
		return -EMSGSIZE;
	return send_with(ep, data, len, SPINE_EP_DESC_MESSAGE | (uint32_t)handler << 8);
}

int spine_ep_reserve_area(struct spine_ep *ep, uint32_t frames, uint64_t *off)
{
	uint64_t fs = ep->frame_size, n = frames ? frames : 1;

	reclaim(ep);
	for (uint32_t c = 0; c < ep->nfree; c++) {
		uint64_t first = ep->free_frames[c];
		uint32_t have = 0, kept = 0;

		/* A run from `first`: every frame first + i * fs held (an O(n^2) search, on
		 * the application's slow path). */
		for (uint32_t j = 0; j < ep->nfree; j++)
			if (ep->free_frames[j] >= first && ep->free_frames[j] < first + n * fs)
				have++;
		if (have != n)
			continue;
		for (uint32_t j = 0; j < ep->nfree; j++)
			if (ep->free_frames[j] < first || ep->free_frames[j] >= first + n * fs)
				ep->free_frames[kept++] = ep->free_frames[j];
		ep->nfree = kept;
		*off = first;
		return 1;
	}
	return 0;
}

void spine_ep_release_area(struct spine_ep *ep, uint64_t off, uint32_t frames)
{
	uint64_t fs = ep->frame_size, area = (uint64_t)ep->frames * fs;

	for (uint64_t i = 0; i < (frames ? frames : 1); i++) {
		uint64_t a = off + i * fs;

		if (a < area && a % fs == 0 && ep->nfree < ep->frames)
			ep->free_frames[ep->nfree++] = a;
	}
}

int spine_ep_write_area(struct spine_ep *ep, uint64_t off, const void *data, uint32_t len)
{
	uint64_t area = (uint64_t)ep->frames * ep->frame_size;

	if (off > area || len > area - off)
		return -ERANGE;
	memcpy(ep->area + off, data, len);
	return 0;
}

int spine_ep_send_bulk_message(struct spine_ep *ep, uint8_t handler, uint64_t off,
			       uint32_t len)
{
	uint64_t word = len | (uint64_t)(SPINE_EP_DESC_MESSAGE | SPINE_EP_DESC_BULK |
					 (uint32_t)handler << 8) << 32;
	uint8_t *slot;

	if (ring_ready(&ep->tx) <= 0)
		return 0;
	slot = ring_slot(&ep->tx);
	memcpy(slot, &off, 8);
	memcpy(slot + 8, &word, 8); /* len, then options */
	ring_advance(&ep->tx);
	return 1;
}

/* Posts one descriptor on the transmit ring. 1: posted; 0: no slot free now. */
static int post_tx(struct spine_ep *ep, uint64_t addr, uint32_t len, uint32_t options)
{
	uint64_t word = len | (uint64_t)options << 32;
	uint8_t *slot;

	if (ring_ready(&ep->tx) <= 0)
		return 0;
	slot = ring_slot(&ep->tx);
	memcpy(slot, &addr, 8);
	memcpy(slot + 8, &word, 8); /* len, then options */
	ring_advance(&ep->tx);
	return 1;
}

int spine_ep_send_bulk_remote(struct spine_ep *ep, uint16_t dest, uint8_t handler,
			      uint64_t off, uint32_t len)
{
	return post_tx(ep, off, len,
		       SPINE_EP_DESC_MESSAGE | SPINE_EP_DESC_BULK | SPINE_EP_DESC_REMOTE |
			       (uint32_t)handler << 8 | (uint32_t)dest << 16);
}

int spine_ep_grant_area(struct spine_ep *ep, uint64_t off, uint32_t len)
{
	return post_tx(ep, off, len, SPINE_EP_DESC_GRANT);
}

int spine_ep_send_message_to(struct spine_ep *ep, uint16_t ext, uint8_t handler,
			     const void *data, uint32_t len)
{
	if (ext == 0xffff)
		return -EINVAL;
	if (len > SPINE_EP_MSG_MAX)
		return -EMSGSIZE;
	/* Bits 16..32 on the transmit ring: the target extension's id + 1. */
	return send_with(ep, data, len,
			 SPINE_EP_DESC_MESSAGE | (uint32_t)handler << 8 | (uint32_t)(ext + 1) << 16);
}

static void put_be(uint8_t *p, uint32_t v, int bytes)
{
	for (int i = bytes - 1; i >= 0; i--, v >>= 8)
		p[i] = (uint8_t)v;
}

static uint32_t get_be(const uint8_t *p, int bytes)
{
	uint32_t v = 0;

	for (int i = 0; i < bytes; i++)
		v = v << 8 | p[i];
	return v;
}

int spine_remote_frame(void *out, uint32_t cap, uint8_t handler, uint32_t to,
		       uint32_t from, const void *payload, uint32_t len)
{
	uint8_t *f = out;

	if (len > SPINE_EP_MSG_MAX || cap < SPINE_REMOTE_HEADER_LEN + len)
		return -EMSGSIZE;
	memset(f, 0xff, 6);
	memset(f + 6, 0, 6);
	put_be(f + 12, SPINE_REMOTE_ETHERTYPE, 2);
	f[14] = 'S';
	f[15] = 'M';
	f[16] = 1;
	f[17] = handler;
	put_be(f + 18, to, 4);
	put_be(f + 22, from, 4);
	put_be(f + 26, len, 2);
	memcpy(f + SPINE_REMOTE_HEADER_LEN, payload, len);
	return (int)(SPINE_REMOTE_HEADER_LEN + len);
}

int spine_remote_parse(const void *frame, uint32_t len, uint8_t *handler, uint32_t *to,
		       uint32_t *from, const uint8_t **payload)
{
	const uint8_t *f = frame;
	uint32_t n;

	if (len < SPINE_REMOTE_HEADER_LEN || get_be(f + 12, 2) != SPINE_REMOTE_ETHERTYPE ||
	    f[14] != 'S' || f[15] != 'M' || f[16] != 1)
		return -EBADMSG;
	n = get_be(f + 26, 2);
	if (n > SPINE_EP_MSG_MAX || SPINE_REMOTE_HEADER_LEN + n > len)
		return -EBADMSG;
	*handler = f[17];
	*to = get_be(f + 18, 4);
	*from = get_be(f + 22, 4);
	*payload = f + SPINE_REMOTE_HEADER_LEN;
	return (int)n;
}

int spine_ep_recv(struct spine_ep *ep, void *buf, uint32_t cap)
{
	return spine_ep_recv_marked(ep, buf, cap, NULL);
}

int spine_ep_recv_marked(struct spine_ep *ep, void *buf, uint32_t cap,
			 struct spine_ep_mark *mark)
{
	struct spine_ep_mark got = { 0 };
	uint64_t addr, frame;
	uint32_t len, options;
	uint8_t *slot;
	int ret;

	if (ring_ready(&ep->rx) <= 0)
		return 0;
	slot = ring_slot(&ep->rx);
	memcpy(&addr, slot, 8);
	memcpy(&len, slot + 8, 4);
	memcpy(&options, slot + 12, 4);
	if ((options & 0xffu) == (SPINE_EP_DESC_MESSAGE | SPINE_EP_DESC_BULK)) {
		uint64_t area = (uint64_t)ep->frames * ep->frame_size;

		/* A bulk message an extension wrote into the area: the region is this side's
		 * (it reserved it), so nothing goes back on the fill ring. Only inside the
		 * area, checked without wrapping. */
		ring_advance(&ep->rx);
		if (len == 0 || addr > area || len > area - addr)
			return -EBADMSG;
		got.message = 1;
		got.bulk = 1;
		got.addr = addr;
		got.handler = (uint8_t)(options >> 8);
		got.source = (uint16_t)(options >> 16);
		if (mark)
			*mark = got;
		if (len > cap)
			return -EMSGSIZE;
		memcpy(buf, ep->area + addr, len);
		return (int)len;
	}
	if (options & SPINE_EP_DESC_MESSAGE) {
		if ((options & 0xfc) || len > SPINE_EP_MSG_MAX) {
			ring_advance(&ep->rx);
			return -EBADMSG;
		}
		got.message = 1;
		got.handler = (uint8_t)(options >> 8);
		got.source = (uint16_t)(options >> 16);
		options &= SPINE_EP_DESC_INLINE;
	}
	if (options == SPINE_EP_DESC_CONTD) {
		/* A piece of a multi-buffer frame: a frame descriptor otherwise. */
		got.more = 1;
		options = 0;
	}
	if (mark)
		*mark = got;
	if (options == SPINE_EP_DESC_INLINE) {
		/* The slot is the adapter's again once the index moves: copy first. */
		if (addr != 0 || len > SPINE_EP_INLINE_BYTES)
			ret = -EBADMSG;
		else if (len > cap)
			ret = -EMSGSIZE;
		else
			ret = (int)len;
		if (ret >= 0)
			memcpy(buf, ring_inline(&ep->rx), len);
		ring_advance(&ep->rx);
		return ret;
	}
	ring_advance(&ep->rx);
	frame = addr - addr % ep->frame_size;
	/* Within the area and within one frame, or it is not used at all. */
	if (options != 0 || addr >= (uint64_t)ep->frames * ep->frame_size || len > ep->frame_size ||
	    (len && (addr + len - 1) / ep->frame_size != addr / ep->frame_size))
		return -EBADMSG;
	if (len > cap) {
		ret = -EMSGSIZE;
	} else {
		memcpy(buf, ep->area + addr, len);
		ret = (int)len;
	}
	if (ep->nfree < ep->frames)
		ep->free_frames[ep->nfree++] = frame;
	refill_one(ep);
	return ret;
}

void spine_ep_close(struct spine_ep *ep)
{
	if (ep->region)
		munmap(ep->region, ep->len);
	free(ep->free_frames);
	memset(ep, 0, sizeof(*ep));
}

int spine_ep_recv_fds(int sock, int *fds, int max)
{
	char byte;
	struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
	union {
		struct cmsghdr align;
		char buf[CMSG_SPACE(8 * sizeof(int))];
	} ctrl;
	struct msghdr msg = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctrl.buf,
		.msg_controllen = sizeof(ctrl.buf),
	};
	int n = 0;

	if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) < 0)
		return -errno;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c)) {
		if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
			continue;
		int count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
		for (int i = 0; i < count; i++) {
			int fd;

			memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof(int));
			if (n < max)
				fds[n++] = fd;
			else
				close(fd);
		}
	}
	return n ? n : -ENOMSG;
}

/* Sends `request_json` and a newline to the endpoint socket of `control_socket` and reads
 * the answer line into `answer`. The connection's fd, or -errno. */
static int ask_line(const char *control_socket, const char *request_json, char *answer,
		    size_t answer_len)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	size_t used = 0;
	int sock, err;

	if (answer_len == 0)
		return -EINVAL;
	if (snprintf(addr.sun_path, sizeof(addr.sun_path), "%s.ep", control_socket) >=
	    (int)sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (sock < 0)
		return -errno;
	if (connect(sock, (struct sockaddr *)&addr, sizeof(addr)) < 0 ||
	    write(sock, request_json, strlen(request_json)) < 0 || write(sock, "\n", 1) < 0)
		goto fail;
	/* The answer line a byte at a time: the fds ride on the byte after it. */
	for (;;) {
		char c;
		ssize_t n = read(sock, &c, 1);

		if (n < 0)
			goto fail;
		if (n == 0) {
			errno = ECONNRESET;
			goto fail;
		}
		if (c == '\n')
			break;
		if (used + 1 < answer_len)
			answer[used++] = c;
	}
	answer[used] = 0;
	return sock;
fail:
	err = errno;
	close(sock);
	return -err;
}

int spine_ep_extension_id(const char *control_socket, const char *name)
{
	char req[512], answer[1024];
	const char *at;
	long id;
	int sock;

	if (strpbrk(name, "\"\\") ||
	    snprintf(req, sizeof(req), "{\"extension\":{\"name\":\"%s\"}}", name) >=
		    (int)sizeof(req))
		return -EINVAL;
	sock = ask_line(control_socket, req, answer, sizeof(answer));
	if (sock < 0)
		return sock;
	close(sock);
	if (strncmp(answer, "{\"error\"", 8) == 0)
		return -ENOENT;
	at = strstr(answer, "\"id\":");
	if (!at)
		return -EPROTO;
	id = strtol(at + 5, NULL, 10);
	return id >= 0 && id <= 0xffff ? (int)id : -EPROTO;
}

int spine_ep_request(const char *control_socket, const char *request_json, int fds[2],
		     char *answer, size_t answer_len)
{
	int sock, got, err;

	sock = ask_line(control_socket, request_json, answer, answer_len);
	if (sock < 0)
		return sock;
	if (strncmp(answer, "{\"error\"", 8) == 0) {
		close(sock);
		return -EPERM;
	}
	got = spine_ep_recv_fds(sock, fds, 2);
	if (got < 2) {
		if (got == 1)
			close(fds[0]);
		errno = got < 0 ? -got : EPROTO;
		goto fail;
	}
	return sock;
fail:
	err = errno;
	close(sock);
	return -err;
}

int spine_ep_recv_frame(struct spine_ep *ep, void *buf, uint32_t cap)
{
	uint32_t got = 0;
	int err = 0;

	if (ring_ready(&ep->rx) <= 0)
		return 0;
	for (;;) {
		struct spine_ep_mark m = { 0 };
		int n = spine_ep_recv_marked(ep, (uint8_t *)buf + got, cap - got, &m);

		if (n < 0)
			err = n;
		else
			got += (uint32_t)n;
		if (!m.more)
			return err ? err : (int)got;
		/* The adapter posts a frame's pieces together: the rest is there. */
		if (ring_ready(&ep->rx) <= 0)
			return -EBADMSG;
	}
}
