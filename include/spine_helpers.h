/* spine_helpers.h: spine's header for extension authors, used next to libbpf's
 * <bpf/bpf_helpers.h>.
 *
 * An extension for spine is an XDP program as the Linux kernel defines it, so everything
 * here is plain eBPF C that the kernel's verifier accepts as well: bounds-checked packet
 * access and the one's-complement checksum arithmetic that header rewriting needs. The
 * bundled programs in bpf/ use these helpers and run unchanged in spine and in the kernel.
 *
 * Below the portable part come spine's own additions, numbered far outside the kernel's
 * ranges so that they can never collide with a future kernel number: a program that uses
 * them runs on spine only (the kernel refuses the unknown map type or helper at load).
 */
#ifndef SPINE_HELPERS_H
#define SPINE_HELPERS_H

#include <linux/types.h>
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* ---- Bounds-checked packet access ------------------------------------------------ */

/* A read position in a packet. `pos` only ever moves forward, and never past `end`, so
 * every header handed out by spine_pull() lies wholly inside the packet. */
struct spine_cursor {
	void *pos;
	void *end;
};

/* Starts a cursor at the first byte of the packet. */
static __always_inline struct spine_cursor spine_cursor_init(const struct xdp_md *ctx)
{
	struct spine_cursor cur = {
		.pos = (void *)(long)ctx->data,
		.end = (void *)(long)ctx->data_end,
	};
	return cur;
}

/* No frame is longer than this; a longer pull fails without looking at the packet. */
#define SPINE_MAX_PULL 0xffff

/* Returns the `len` bytes at the cursor and moves past them, or NULL (cursor unchanged)
 * if fewer than `len` bytes remain. The comparison against `end` is what lets the
 * verifier accept accesses through the returned pointer; the SPINE_MAX_PULL bound is
 * what lets it accept a `len` computed from packet fields (an IHL, an extension header
 * length), whose range it could not otherwise tell. */
static __always_inline void *spine_pull(struct spine_cursor *cur, __u32 len)
{
	void *p = cur->pos;

	if (len > SPINE_MAX_PULL || p + len > cur->end)
		return NULL;
	cur->pos = p + len;
	return p;
}

/* Typed spine_pull(): `SPINE_PULL(&cur, struct iphdr)` is a `struct iphdr *` or NULL. */
#define SPINE_PULL(cur, type) ((type *)spine_pull((cur), sizeof(type)))

/* Bytes left between the cursor and the end of the packet. */
static __always_inline __u32 spine_remaining(const struct spine_cursor *cur)
{
	return (__u32)(cur->end - cur->pos);
}

/* True for the EtherTypes of an 802.1Q (C-tag) or 802.1ad (S-tag) VLAN header. */
static __always_inline int spine_eth_is_vlan(__be16 proto)
{
	return proto == bpf_htons(ETH_P_8021Q) || proto == bpf_htons(ETH_P_8021AD);
}

/* ---- Internet checksum (RFC 1071, RFC 1624) ------------------------------------------ */

/* Folds a one's-complement sum of up to 64 bits to 16 bits and inverts it: the value that
 * goes into a checksum field. Like the kernel's csum_fold(), but wide enough to take a
 * bpf_csum_diff() result added to a 16-bit field without overflowing first. */
static __always_inline __u16 spine_csum_fold(__u64 sum)
{
	sum = (sum & 0xffffffff) + (sum >> 32);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	sum = (sum & 0xffff) + (sum >> 16);
	return (__u16)~sum;
}

/* RFC 1624, eqn. 3: the checksum field after one 16-bit word it covers changed from
 * `from` to `to`, HC' = ~(~HC + ~m + m'). All three in the same byte order (the sum
 * does not care which, as long as it is one). */
static __always_inline __u16 spine_csum_replace16(__u16 check, __u16 from, __u16 to)
{
	return spine_csum_fold((__u64)(__u16)~check + (__u16)~from + to);
}

/* spine_csum_replace16() for a 32-bit field, such as an IPv4 address. */
static __always_inline __u16 spine_csum_replace32(__u16 check, __u32 from, __u32 to)
{
	__u64 sum = (__u16)~check;

	sum += (__u16)~(from >> 16) + (__u16)~(from & 0xffff);
	sum += (to >> 16) + (to & 0xffff);
	return spine_csum_fold(sum);
}

/* Applies a 32-bit checksum difference, as bpf_csum_diff() returns it with a zero seed,
 * to a checksum field. */
static __always_inline __u16 spine_csum_apply(__u16 check, __u32 diff)
{
	return spine_csum_fold((__u64)(__u16)~check + diff);
}

/* ---- spine's additions (not kernel XDP) ---------------------------------------------- */

/* An endpoint map: like BPF_MAP_TYPE_XSKMAP (key and value 4 bytes), but its slots hold
 * spine endpoints. An application binds its endpoint to a slot when it opens it
 * ({"map": {"name": ..., "index": N}} in the endpoint request); the slot empties when the
 * endpoint is closed or its client goes away. bpf_redirect_map(&map, N, flags) then
 * delivers the frame to that endpoint (XDP_REDIRECT); an empty slot gives the low bits
 * of flags as the verdict, as an empty xskmap slot does. Programs may look a slot up
 * (to test it for NULL) and redirect; only the adapter writes slots. */
#define SPINE_MAP_TYPE_ENDPOINT 0x53500001

/* Active messages. An extension registers handler N (0..255) with a program in section
 * SEC("spine/handler/N"); it runs on a message sent for handler N and gets this context
 * (read-only): the payload as data..data_end (bounds-check it as a packet), its length
 * (the verifier knows len <= SPINE_MSG_MAX), the id of the endpoint that sent it, and N.
 * A handler may not call the packet helpers (redirects, adjust_*, tail calls, fib). */
struct spine_msg_md {
	__u32 data;
	__u32 data_end;
	__u32 len;
	__u32 source;
	__u32 handler;
};

/* Largest payload of a small active message. */
#define SPINE_MSG_MAX 240

/* Sends an active message of len bytes (1..SPINE_MSG_MAX) at data to host endpoint
 * `endpoint` (an endpoint id, as a handler's ctx->source), marked with `handler`
 * (0..255) on the endpoint's receive ring. ctx is the program's context, or 0 in a
 * bpf_timer callback, which has none (the verifier takes either; the message goes out
 * in the sender's domain). Returns 0, or
 * -EINVAL (endpoint or handler out of range), -E2BIG (too long), -ENOSPC (more than 64
 * messages in one burst). Only a domain that lists "spine_msg_send" in its helpers
 * grants it; any other refuses the program at load. */
static long (*spine_msg_send)(void *ctx, __u32 endpoint, __u32 handler, const void *data,
			      __u32 len) = (void *)0x53500001;

/* A handler's ctx->source for a message another extension posted: this bit, with the
 * sending extension's id in the low 16 bits (endpoint ids never reach it). */
#define SPINE_MSG_SOURCE_EXT 0x80000000u

/* Active messages between adapters, over a UDP tunnel port (kind "udp"). A message is
 * one Ethernet frame of ethertype SPINE_ETH_P_MSG (0x88B6, IEEE 802 local experimental
 * 2) with the header below after the Ethernet header, all fields big-endian, then `len`
 * payload bytes (the frame may be longer: padding is ignored). An application sends one
 * through an endpoint bound to the tunnel port (spine_client::remote::frame builds it).
 * The receiving adapter recognises the ethertype followed by the magic on a tunnel
 * port's receive path only (a frame of the ethertype without the magic is an ordinary
 * frame) and checks version and length (a malformed one is dropped and counted,
 * msg_remote_bad). to == SPINE_MSG_TO_HANDLERS runs handler N of every extension whose
 * domain may use that tunnel port, with ctx->source = SPINE_MSG_SOURCE_REMOTE | the
 * tunnel port's index << 16 | the low 16 bits of `from` (the peer's claim: it is not
 * checked, only the port is the receiver's own knowledge). Any other `to` is an endpoint
 * id on the receiver: delivered, marked with the handler and the low 16 bits of `from`,
 * only to an endpoint bound to that tunnel port. spine_msg_send to a remote source sends
 * the message back out of its tunnel port, to endpoint `from` over there (the sender's
 * domain must be allowed the port; from = SPINE_MSG_SOURCE_EXT | the extension's id);
 * with the source's low 16 bits SPINE_MSG_REMOTE_HANDLERS, to the handlers over there.
 * Any extension may also send to SPINE_MSG_SOURCE_REMOTE | port index << 16 | endpoint
 * id (or SPINE_MSG_REMOTE_HANDLERS), the index being the tunnel port's position among
 * the adapter's ports; a port that is no tunnel or not allowed drops the message.
 * A message whose `from` has SPINE_MSG_SOURCE_EXT set (an extension sent it) arrives
 * with those low bits already SPINE_MSG_REMOTE_HANDLERS, so replying to ctx->source
 * reaches the sender's adapter's handlers. Endpoint ids are 16 bits here: an endpoint
 * whose id is 0xffff or above cannot be addressed over a tunnel. */
#define SPINE_ETH_P_MSG 0x88B6
#define SPINE_MSG_TO_HANDLERS 0xffffffffu
#define SPINE_MSG_SOURCE_REMOTE 0x40000000u
#define SPINE_MSG_REMOTE_HANDLERS 0xffffu
struct spine_remote_msg_hdr {
	__u8 magic[2]; /* 'S', 'M' */
	__u8 version;  /* 1 */
	__u8 handler;
	__u32 to;      /* big-endian */
	__u32 from;    /* big-endian */
	__u16 len;     /* big-endian, 0..SPINE_MSG_MAX */
} __attribute__((packed));

/* A piece of a bulk message (version 2): every piece but the last carries exactly
 * SPINE_MSG_PIECE_MAX bytes and the last the rest, at an offset that is a multiple of
 * it; the receiving adapter reassembles up to SPINE_MSG_BULK_MAX bytes and runs the
 * handlers (or fills an endpoint's grant) once every piece has arrived. */
#define SPINE_MSG_PIECE_MAX 1024
#define SPINE_MSG_BULK_MAX (16 * SPINE_MSG_PIECE_MAX)
struct spine_remote_piece_hdr {
	__u8 magic[2]; /* 'S', 'M' */
	__u8 version;  /* 2 */
	__u8 handler;
	__u32 to;      /* big-endian, as above */
	__u32 from;    /* big-endian, as above */
	__u16 len;     /* big-endian, this piece's length, 1..SPINE_MSG_PIECE_MAX */
	__u32 id;      /* big-endian, the sender's message id */
	__u32 total;   /* big-endian, the message's length, 1..SPINE_MSG_BULK_MAX */
	__u32 offset;  /* big-endian, this piece's offset in the message */
} __attribute__((packed));

/* The receiver's answer to a bulk message (version 3): an ACK when it is whole, a NACK
 * naming the missing pieces (bit i: piece i) after a gap; the sending adapter resends
 * just those, a bounded number of times. Messages an application split into pieces
 * itself are not kept for resending: their ACKs and NACKs are counted and dropped. */
#define SPINE_MSG_CTL_ACK 1
#define SPINE_MSG_CTL_NACK 2
struct spine_remote_ctl_hdr {
	__u8 magic[2]; /* 'S', 'M' */
	__u8 version;  /* 3 */
	__u8 kind;     /* SPINE_MSG_CTL_ACK or SPINE_MSG_CTL_NACK */
	__u32 from;    /* big-endian, `from` of the message's pieces */
	__u32 id;      /* big-endian, the message id */
	__u32 total;   /* big-endian, the message's length */
	__u32 missing; /* big-endian, 0 in an ACK */
} __attribute__((packed));
_Static_assert(sizeof(struct spine_remote_piece_hdr) == 26, "piece header is 26 bytes");
_Static_assert(sizeof(struct spine_remote_ctl_hdr) == 20, "ack/nack header is 20 bytes");

/* Posts an active message of len bytes (1..SPINE_MSG_MAX) at data to handler `handler`
 * (0..255) of every extension of the sender's own domain on the same adapter (the
 * sender's own handler included, if it registered one). Asynchronous: the message is
 * queued and the adapter runs the handlers later, each under the watchdog, never inside
 * this call; a full queue drops it and counts the drop (msg_post_dropped). ctx as for
 * spine_msg_send (0 in a bpf_timer callback). Returns 0
 * once queued, or -EINVAL (handler out of range), -E2BIG (too long), -ENOSPC (more than
 * 64 messages sent and posted in one burst). Granted only by a domain that lists
 * "spine_msg_post" in its helpers. */
static long (*spine_msg_post)(void *ctx, __u32 handler, const void *data,
			      __u32 len) = (void *)0x53500002;

/* spine_msg_post to one named extension: `to` = SPINE_MSG_TO(ext, handler) names handler
 * `handler` of extension `ext` alone (the id the host uses: its endpoint socket answers
 * {"extension":{"name":N}} with it), SPINE_MSG_TO_ALL(handler) every extension of the
 * sender's domain that registered it, as spine_msg_post. The extension must be of the
 * sender's own domain and register a handler, checked at the call. With delay_ns > 0
 * the handler runs no sooner than delay_ns after this call (on bpf_ktime_get_ns's clock;
 * at most SPINE_MSG_DELAY_MAX_NS), from the sender's worker's queue of delayed posts
 * (64; checked once a round, so later by up to a round). Returns 0 once queued, or
 * -ENOENT (no such extension in the sender's domain; counted msg_post_refused), -EINVAL
 * (a reserved bit of `to` set, or a delay past the maximum), -ENOSPC (the delayed
 * queue is full: msg_post_delay_full; or the outbox as for spine_msg_post), -E2BIG.
 * Granted only by a domain that lists "spine_msg_post_to". */
#define SPINE_MSG_DELAY_MAX_NS 10000000000ull
#define SPINE_MSG_TO(ext, handler) \
	((((__u64)(ext) + 1) << 16) | ((__u64)(handler) & 0xff))
#define SPINE_MSG_TO_ALL(handler) ((__u64)(handler) & 0xff)
static long (*spine_msg_post_to)(void *ctx, __u64 to, const void *data, __u32 len,
				 __u64 delay_ns) = (void *)0x53500007;

/* Bulk active messages. A client may send a message that carries no payload but a
 * reference to bulk data in its endpoint's buffer area (Endpoint::send_bulk_message:
 * offset and length, checked by the adapter against that endpoint's area). Its handlers
 * run with ctx->len 0 and read the data with these two helpers, which a domain grants
 * by listing them ("spine_msg_bulk_len", "spine_msg_bulk_read"). */

/* The length of the bulk data of the message being handled; 0 for a small message. */
static __u64 (*spine_msg_bulk_len)(void *ctx) = (void *)0x53500003;

/* Copies len bytes at `offset` of the bulk data into dst. Returns 0, or -EFAULT when
 * offset + len passes the bulk data's end (or the data is no longer inside its
 * endpoint's area: checked on every call), -EINVAL when there is no bulk data; on an
 * error dst is zeroed. */
static long (*spine_msg_bulk_read)(void *ctx, __u64 offset, void *dst, __u32 len) =
	(void *)0x53500004;

/* Bulk messages sent by an extension (extension -> host). A handler run on an
 * endpoint's message copies data into that endpoint's buffer area, where the client
 * told it to (typically a region it reserved, Endpoint::reserve_area, named in the
 * message), then sends the endpoint a bulk message referring to it; the client
 * receives the data in place (recv_marked hands it the area's bytes, marked with the
 * handler and the extension's id) and the region stays the client's. Granted by
 * listing "spine_msg_bulk_write" and "spine_msg_send_bulk". */

/* Copies len bytes at src to `offset` of the buffer area of the endpoint whose message
 * is being handled. Returns 0, -EFAULT when offset + len passes the area's end (checked
 * on every call: no write leaves that endpoint's area), -EINVAL when the program runs
 * on no endpoint's message (an XDP program, an applet, a posted or remote message).
 * ctx is the program's context (a bpf_timer callback, having none, cannot call it). */
static long (*spine_msg_bulk_write)(void *ctx, __u64 offset, const void *src, __u32 len) =
	(void *)0x53500005;

/* Sends host endpoint `endpoint` a bulk active message for `handler` (0..255): a
 * reference to len bytes (at least 1) at `offset` of that endpoint's buffer area. The
 * adapter checks the reference against the area when it delivers it (a bad one is
 * counted bad_desc on the endpoint and msg_undelivered) and delivers only to an endpoint
 * of the sender's domain (one another worker serves gets the reference through the
 * worker rings). To a remote source (a tunnel: SPINE_MSG_SOURCE_REMOTE | port index << 16
 * | endpoint id or SPINE_MSG_REMOTE_HANDLERS) only from a handler run on an endpoint's
 * message: the reference is then into that endpoint's area, and the adapter sends its
 * bytes (at most 16 KiB) over the tunnel in pieces, reassembled over there before the
 * handlers run (msg_bulk_remote_out); from anywhere else, over 16 KiB or outside the
 * area, it is refused, counted msg_bulk_remote_refused.
 * ctx as for spine_msg_send.
 * Returns 0 once queued, -EINVAL (endpoint or handler out of range, len 0), -ENOSPC
 * (more than 64 messages in one burst). */
static long (*spine_msg_send_bulk)(void *ctx, __u32 endpoint, __u32 handler, __u64 offset,
				   __u32 len) = (void *)0x53500006;

/* Endpoint applets (U-Net/SLE). A program in SEC("spine/applet/tx") runs on each frame an
 * endpoint's client transmits (doTx), one in SEC("spine/applet/rx") on each frame about
 * to be delivered to the endpoint (doRx), for every endpoint whose request names the
 * extension ({"applets": "<extension>"}). Both are XDP programs: struct xdp_md over the
 * frame (ingress_ifindex: the endpoint's port; rx_queue_index: the endpoint's id), the
 * domain's helpers. XDP_PASS goes on (out of the port / into the endpoint), XDP_TX
 * reflects (doTx: into the endpoint; doRx: back out of the port), XDP_REDIRECT as in an
 * XDP program (bpf_redirect, devmaps, BPF_F_BROADCAST), anything else drops.
 * SEC("spine/applet/tick") runs at most every 100 us on a blank, zeroed 256-byte frame
 * (timers): write a frame into it (bpf_xdp_store_bytes), trim it (bpf_xdp_adjust_tail)
 * and return XDP_TX to send it out of the endpoint's port, or XDP_DROP to send nothing.
 *
 * Timers: handlers and applets may arm a struct bpf_timer held in a map value
 * (bpf_timer_init, bpf_timer_set_callback, bpf_timer_start, bpf_timer_cancel, as in the
 * kernel). The callback runs on the worker that armed the timer (for a handler run by
 * an endpoint's message, or an applet: the worker serving that endpoint), under the
 * watchdog; a periodic timer is one whose callback starts it again. A callback may send
 * and post messages (spine_msg_send(0, ...)). An extension that is unloaded or detached
 * by the watchdog has its timers cancelled. */

#endif /* SPINE_HELPERS_H */
