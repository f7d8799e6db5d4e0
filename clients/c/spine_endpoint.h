/* spine endpoints from C: the client side of the shared region an adapter hands out
 * (a memfd with a header, four AF_XDP-layout rings and a buffer area of fixed-size
 * frames), and the SCM_RIGHTS hand-over of its fds.
 *
 * Single-threaded and non-blocking, like the Rust client (`spine-client`): send copies
 * a message into a free frame and posts it on the transmit ring; recv copies a received
 * message out and gives its frame back for receive. Pair it with the endpoint's eventfd
 * (poll for POLLIN) to sleep. Everything read from the region is checked: an adapter
 * cannot make this library read or write outside the mapping.
 */
#ifndef SPINE_ENDPOINT_H
#define SPINE_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Messages of this many bytes or fewer travel inline: each transmit/receive ring entry
 * has a 64-byte slot of its own (after the entries, same index), and a descriptor with
 * option SPINE_EP_DESC_INLINE (addr 0) carries its payload there instead of in a frame.
 * spine_ep_send and spine_ep_recv choose and read inline transparently. */
#define SPINE_EP_INLINE_BYTES 64u
#define SPINE_EP_DESC_INLINE 1u
/* Multi-buffer frames (receive ring only, options exactly this): AF_XDP's XDP_PKT_CONTD,
 * at bit 7 here (bit 0 is SPINE_EP_DESC_INLINE). On an endpoint requested with
 * "multi_buffer": true, a frame longer than one area frame arrives as several
 * descriptors, every one but the last marked; the adapter posts them together. Read
 * them with spine_ep_recv_marked (mark->more) or whole with spine_ep_recv_frame. */
#define SPINE_EP_DESC_CONTD 128u

/* An active message (docs/ARCHITECTURE.md, "Active messages"): option bit 1, the handler
 * number in bits 8..16 and, on the receive ring, the source (the sending extension's id)
 * in bits 16..32 (on the transmit ring there: the one extension to run it, its id + 1, or
 * 0 for every extension of the domain; see spine_ep_send_message_to); at most
 * SPINE_EP_MSG_MAX bytes, inline or in a frame. */
#define SPINE_EP_DESC_MESSAGE 2u
#define SPINE_EP_MSG_MAX 240u

/* A bulk active message (with SPINE_EP_DESC_MESSAGE): no payload but a reference to `len`
 * bytes (at least 1) at offset `addr` of the endpoint's buffer area, any frames. Sent
 * with spine_ep_send_bulk_message (the handler reads the bytes with spine_msg_bulk_read);
 * received from an extension (spine_msg_send_bulk, bytes it wrote there with
 * spine_msg_bulk_write) by spine_ep_recv_marked, which checks the reference against the
 * area and copies the bytes out. The area stays the application's: reserve the region
 * with spine_ep_reserve_area first, so that the adapter never receives into it. */
#define SPINE_EP_DESC_BULK 16u

/* A grant (transmit ring, options exactly this): lends `len` bytes at offset `addr` of the
 * area to the adapter for one bulk message from another adapter over a tunnel, which
 * arrives through spine_ep_recv_marked as a bulk message in that region (then the
 * application's again). At most SPINE_EP_GRANTS outstanding. See spine_ep_grant_area. */
#define SPINE_EP_DESC_GRANT 32u
#define SPINE_EP_GRANTS 8u

/* With SPINE_EP_DESC_MESSAGE | SPINE_EP_DESC_BULK on the transmit ring: the referenced
 * bytes go to another adapter over the endpoint's tunnel port, in pieces the adapter reads
 * out, for the endpoint whose id is in bits 16..32 over there, or its handlers with
 * SPINE_EP_REMOTE_HANDLERS. See spine_ep_send_bulk_remote. */
#define SPINE_EP_DESC_REMOTE 64u
#define SPINE_EP_REMOTE_HANDLERS 0xFFFFu
/* The largest bulk message a tunnel carries. */
#define SPINE_REMOTE_BULK_MAX 16384u

/* Active messages between adapters (crates/spine-endpoint/src/remote.rs): one message per
 * Ethernet frame of ethertype SPINE_REMOTE_ETHERTYPE, sent with spine_ep_send through an
 * endpoint on a tunnel port; the adapter at the other end runs its handlers (to =
 * SPINE_REMOTE_TO_HANDLERS) or delivers the payload to its endpoint `to`. */
#define SPINE_REMOTE_ETHERTYPE 0x88B6u
#define SPINE_REMOTE_TO_HANDLERS 0xFFFFFFFFu
#define SPINE_REMOTE_HEADER_LEN 28u

/* What spine_ep_recv_marked says about a received message. */
struct spine_ep_mark {
	int message;		/* 1: an active message; 0: a frame */
	uint8_t handler;	/* an active message's handler number */
	uint16_t source;	/* an active message's source: the sending extension's id */
	int bulk;		/* 1: a bulk message (copied out of the area from `addr`) */
	uint64_t addr;		/* a bulk message's offset in the buffer area */
	int more;		/* 1: a piece of a multi-buffer frame, more follows */
};

struct spine_ep_ring {
	uint8_t *base;		/* producer index at +0, consumer at +64, entries at +128 */
	uint8_t *inline_slots;	/* descriptor rings: one 64-byte slot per entry */
	uint32_t entries;	/* a power of two */
	uint32_t entry_bytes;	/* 16: descriptors (transmit, receive); 8: addresses */
	uint32_t local;		/* this side's index, never read back from shared memory */
	int producer;
};

struct spine_ep {
	uint8_t *region;
	size_t len;
	uint32_t ring_entries, frame_size, frames;
	uint8_t *area;		/* the buffer area */
	struct spine_ep_ring tx, rx, fill, comp;
	uint64_t *free_frames;	/* frame addresses this side holds */
	uint32_t nfree;
};

/* Maps the region `memfd` (the fd stays the caller's), checks its header against its
 * size and gives half of the frames to the adapter for receive. 0, or -errno. */
int spine_ep_open(struct spine_ep *ep, int memfd);

/* Sends a copy of `len` bytes (inline when len <= SPINE_EP_INLINE_BYTES). 1: sent; 0: no
 * frame or transmit slot free now (try again after the adapter has run); -EMSGSIZE:
 * longer than a frame. */
int spine_ep_send(struct spine_ep *ep, const void *data, uint32_t len);

/* Sends an active message for `handler` of the extensions in the endpoint's domain,
 * carrying a copy of `len` bytes. 1: sent; 0: no room now; -EMSGSIZE: longer than
 * SPINE_EP_MSG_MAX. */
int spine_ep_send_message(struct spine_ep *ep, uint8_t handler, const void *data,
			  uint32_t len);

/* Takes `frames` consecutive frames this side holds (none on the fill ring or in flight)
 * out of the library's own use, for bulk data, and stores the area offset of the first in
 * `*off`. 1: reserved; 0: no such run is free now. They stay the application's (the
 * adapter never receives into them) until spine_ep_release_area. */
int spine_ep_reserve_area(struct spine_ep *ep, uint32_t frames, uint64_t *off);

/* Gives `frames` frames from `off` (a spine_ep_reserve_area result) back. */
void spine_ep_release_area(struct spine_ep *ep, uint64_t off, uint32_t frames);

/* Copies `len` bytes to offset `off` of the buffer area. 0, or -ERANGE: not inside the
 * area. */
int spine_ep_write_area(struct spine_ep *ep, uint64_t off, const void *data, uint32_t len);

/* Sends a bulk active message for `handler`: a reference to `len` bytes at offset `off`
 * of the buffer area (keep them unchanged until the handler has answered). The adapter
 * checks the reference (a bad one is counted bad_desc). 1: sent; 0: no transmit slot
 * free now. */
int spine_ep_send_bulk_message(struct spine_ep *ep, uint8_t handler, uint64_t off,
			       uint32_t len);

/* Sends a bulk active message to another adapter over the tunnel port the endpoint is
 * bound to: `len` bytes (1..=SPINE_REMOTE_BULK_MAX) at offset `off` of the buffer area,
 * which the adapter reads out and sends in pieces, for `handler` of endpoint `dest` over
 * there (SPINE_EP_REMOTE_HANDLERS: its handlers), from this endpoint's id (keep the bytes
 * unchanged until the descriptor is taken). The adapter checks it (bad_desc;
 * msg_bulk_remote_refused over 16 KiB or on a port that is no tunnel). 1: sent; 0: no
 * transmit slot free now. */
int spine_ep_send_bulk_remote(struct spine_ep *ep, uint16_t dest, uint8_t handler,
			      uint64_t off, uint32_t len);

/* Lends `len` bytes at offset `off` of the buffer area (reserve them with
 * spine_ep_reserve_area first) to the adapter for one bulk message from another adapter
 * (SPINE_EP_DESC_GRANT). 1: sent; 0: no transmit slot free now. */
int spine_ep_grant_area(struct spine_ep *ep, uint64_t off, uint32_t len);

/* As spine_ep_send_message, for the one extension `ext` (its id, from
 * spine_ep_extension_id) rather than every extension of the domain that registered
 * `handler` (none of that id, or one that did not register it: counted msg_unhandled).
 * -EINVAL: id 0xffff, which cannot be named. */
int spine_ep_send_message_to(struct spine_ep *ep, uint16_t ext, uint8_t handler,
			     const void *data, uint32_t len);

/* The id of the loaded extension `name` of the adapter whose control socket is
 * `control_socket` (asked on its endpoint socket: {"extension": {"name": ...}}). The id
 * (0..65535); -ENOENT: no such extension; other -errno: the socket failed. */
int spine_ep_extension_id(const char *control_socket, const char *name);

/* Receives one message into `buf` (`cap` bytes), an active message's payload too (a bulk
 * message's referenced bytes as well). Its length; 0: none ready; -EMSGSIZE: longer than
 * `cap` (it is dropped); -EBADMSG: the adapter wrote an impossible descriptor (skipped),
 * a bulk reference outside the area included. */
int spine_ep_recv(struct spine_ep *ep, void *buf, uint32_t cap);

/* As spine_ep_recv, and fills `mark` (when not NULL) for a message it returns. */
int spine_ep_recv_marked(struct spine_ep *ep, void *buf, uint32_t cap,
			 struct spine_ep_mark *mark);

/* As spine_ep_recv, a multi-buffer frame's pieces (SPINE_EP_DESC_CONTD) gathered into
 * `buf` in order: the whole frame's length; 0: none ready; -EMSGSIZE: longer than
 * `cap` (all of it is consumed and dropped); -EBADMSG as spine_ep_recv, or a frame
 * whose last piece is missing. */
int spine_ep_recv_frame(struct spine_ep *ep, void *buf, uint32_t cap);

/* Writes the frame of an active message for the adapter at the other end of a tunnel
 * into `out` (`cap` bytes): for its `handler`, to its handlers or endpoint `to`, from
 * `from` (this endpoint's id, from the answer to spine_ep_request: replies come back to
 * it), carrying `len` bytes of `payload`. The frame's length; -EMSGSIZE: `len` over
 * SPINE_EP_MSG_MAX or `cap` too small. */
int spine_remote_frame(void *out, uint32_t cap, uint8_t handler, uint32_t to,
		       uint32_t from, const void *payload, uint32_t len);

/* Reads a remote message frame of `len` bytes: fills handler, to, from and points
 * `payload` into `frame`. The payload's length; -EBADMSG: not such a frame (ethertype,
 * magic, version) or a length past its end. */
int spine_remote_parse(const void *frame, uint32_t len, uint8_t *handler, uint32_t *to,
		       uint32_t *from, const uint8_t **payload);

/* Unmaps the region and frees the library's memory. */
void spine_ep_close(struct spine_ep *ep);

/* Receives up to `max` fds sent with SCM_RIGHTS over the Unix socket `sock` (the region
 * first, then the eventfd). Their number, or -errno. */
int spine_ep_recv_fds(int sock, int *fds, int max);

/* Asks the running adapter whose control socket is `control_socket` (its endpoint socket
 * is that path plus ".ep") for an endpoint: sends `request_json`, one JSON object without
 * a newline (docs/API.md, "Endpoints": {"port": ..., "match": {...}}), and copies the
 * answer line into `answer` (`answer_len` bytes, NUL-terminated, truncated if longer).
 * On success stores the region's memfd and the eventfd in fds[0] and fds[1] (open the
 * region with spine_ep_open) and returns the connection's fd: keep it open for as long as
 * the endpoint is used (closing it, or exiting, gives the endpoint back). -EPERM: the
 * adapter refused, `answer` holds {"error": {"kind", "message"}}; other -errno: the
 * socket failed. */
int spine_ep_request(const char *control_socket, const char *request_json, int fds[2],
		     char *answer, size_t answer_len);

#ifdef __cplusplus
}
#endif

#endif
