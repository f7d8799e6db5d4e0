/* The token-based flow-control applet: reliable, in-order delivery between two
 * endpoints (on two adapters), with retransmission on loss and no host involved.
 *
 * Frames are Ethernet/IPv4/UDP (no IP options) whose payload begins with an 8-byte
 * header, struct fc: the sending application leaves it zeroed; the applet marks the
 * frame DATA with the next sequence number. The sender keeps every frame until it is
 * acknowledged (window[], WINDOW_SLOTS frames of at most FRAME_MAX bytes) and has
 * TOKENS frames in flight at most: doTx sends a frame at once when a token is free and
 * the frames before it have gone, else the tick sends it once one is. The receiver
 * delivers exactly the next expected frame (doRx: XDP_PASS) and drops the others
 * (duplicates, or frames after a gap: go-back-N); its tick sends a cumulative ACK (the
 * next sequence number it expects) after any data frame, on a header copied from the
 * first data frame. An ACK frees the sender's tokens; when none has come for RTO_NS
 * while frames are in flight, the sender's tick goes back to the oldest unacknowledged
 * frame and sends the window again, one frame per tick.
 *
 * An application may not have more than WINDOW_SLOTS frames unacknowledged: doTx drops
 * a frame beyond (counted as `overflow`). Both roles live in one object: an endpoint
 * that sends is a sender, one that receives data is a receiver.
 *
 * The object's XDP program drops loss_pct percent of the frames it sees, at random
 * (attached to the tunnel port to inject loss in tests; 0 by default).
 */
#include <spine_helpers.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

#define WINDOW_SLOTS 256
#define TOKENS 16
#define FRAME_MAX 240
#define HDR_LEN (sizeof(struct ethhdr) + sizeof(struct iphdr) + sizeof(struct udphdr))
#define FC_OFF HDR_LEN
#define MIN_LEN (HDR_LEN + sizeof(struct fc))
#define TICK_FRAME 256
#define RTO_NS 2000000ULL

enum { FC_APP = 0, FC_DATA = 1, FC_ACK = 2 };

struct fc {
	__u8 type;
	__u8 pad[3];
	__u32 seq;
};

struct state {
	/* Sender. */
	__u32 next_seq;	/* the next sequence number to give */
	__u32 acked;	/* every frame before it is acknowledged */
	__u32 sent;	/* every frame before it was sent (since the last go-back) */
	__u32 pad0;
	__u64 last_progress;	/* when acked last moved, or the last go-back */
	/* Receiver. */
	__u32 expected;	/* the next sequence number to deliver */
	__u32 need_ack;
	__u32 have_tmpl;
	__u32 pad1;
	/* Counters. */
	__u64 retransmits;	/* go-backs */
	__u64 resent;		/* frames sent by the tick */
	__u64 delivered;
	__u64 out_of_order;	/* dropped by the receiver: duplicates and after gaps */
	__u64 acks_sent;
	__u64 acks_taken;
	__u64 overflow;
	__u64 lost;		/* dropped by the XDP program (injected loss) */
};

struct slot {
	__u32 len;
	__u32 pad;
	__u8 data[256];	/* FRAME_MAX used; 256 so that a length masked to 8 bits fits */
};

/* `len`, known to lie in [MIN_LEN, FRAME_MAX], in a form the verifier can bound: the
 * compiler folds two range checks into one it cannot follow. */
static __always_inline __u32 bounded(__u32 len)
{
	asm volatile("" : "+r"(len));
	len &= 0xff;
	return len < MIN_LEN ? 0 : len;
}

struct tmpl {
	__u8 hdr[HDR_LEN];
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct state);
} state SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, WINDOW_SLOTS);
	__type(key, __u32);
	__type(value, struct slot);
} window SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tmpl);
} tmpl SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);
} loss_pct SEC(".maps");

static __always_inline struct state *get_state(void)
{
	__u32 k = 0;

	return bpf_map_lookup_elem(&state, &k);
}

/* The protocol header of a frame, or NULL when it is no IPv4/UDP frame with one. */
static __always_inline struct fc *header(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct fc *fc = data + FC_OFF;

	if ((void *)(fc + 1) > end)
		return NULL;
	if (eth->h_proto != bpf_htons(ETH_P_IP) || ip->ihl != 5 || ip->protocol != IPPROTO_UDP)
		return NULL;
	return fc;
}

SEC("xdp")
int lossy(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u32 *pct = bpf_map_lookup_elem(&loss_pct, &k);
	struct state *s;

	if (!pct || *pct == 0 || bpf_get_prandom_u32() % 100 >= *pct)
		return XDP_PASS;
	s = get_state();
	if (s)
		s->lost++;
	return XDP_DROP;
}

SEC("spine/applet/tx")
int fc_tx(struct xdp_md *ctx)
{
	struct state *s = get_state();
	struct fc *fc = header(ctx);
	struct slot *slot;
	__u32 len = ctx->data_end - ctx->data;
	__u32 seq, k;

	if (!s || !fc || fc->type != FC_APP)
		return XDP_PASS;
	if (len < MIN_LEN || len > FRAME_MAX || s->next_seq - s->acked >= WINDOW_SLOTS) {
		s->overflow++;
		return XDP_DROP;
	}
	seq = s->next_seq;
	k = seq % WINDOW_SLOTS;
	slot = bpf_map_lookup_elem(&window, &k);
	if (!slot)
		return XDP_DROP;
	fc->type = FC_DATA;
	fc->seq = seq;
	len = bounded(len);
	if (len == 0 || bpf_xdp_load_bytes(ctx, 0, slot->data, len) != 0)
		return XDP_DROP;
	slot->len = len;
	s->next_seq = seq + 1;
	if (s->sent == seq && seq - s->acked < TOKENS) {
		if (s->sent == s->acked)
			s->last_progress = bpf_ktime_get_ns();
		s->sent = seq + 1;
		return XDP_PASS;
	}
	/* Kept: the tick sends it once a token is free. */
	return XDP_DROP;
}

SEC("spine/applet/rx")
int fc_rx(struct xdp_md *ctx)
{
	struct state *s = get_state();
	struct fc *fc = header(ctx);
	__u32 k = 0;

	if (!s || !fc)
		return XDP_PASS;
	if (fc->type == FC_ACK) {
		__u32 ack = fc->seq;

		s->acks_taken++;
		/* Within (acked, next_seq]: wrap-safe differences. */
		if (ack - s->acked - 1 < s->next_seq - s->acked) {
			s->acked = ack;
			s->last_progress = bpf_ktime_get_ns();
			if (s->sent - s->acked > s->next_seq - s->acked)
				s->sent = s->acked;
		}
		return XDP_DROP;
	}
	if (fc->type != FC_DATA)
		return XDP_PASS;
	if (!s->have_tmpl) {
		struct tmpl *t = bpf_map_lookup_elem(&tmpl, &k);

		if (!t || bpf_xdp_load_bytes(ctx, 0, t->hdr, HDR_LEN) != 0)
			return XDP_DROP;
		s->have_tmpl = 1;
	}
	s->need_ack = 1;
	if (fc->seq != s->expected) {
		s->out_of_order++;
		return XDP_DROP;
	}
	s->expected++;
	s->delivered++;
	return XDP_PASS;
}

/* Writes `len` bytes of `src` at the start of the blank tick frame and trims it. */
static __always_inline int emit(struct xdp_md *ctx, void *src, __u32 len)
{
	if (bpf_xdp_store_bytes(ctx, 0, src, len) != 0)
		return XDP_DROP;
	if (bpf_xdp_adjust_tail(ctx, (int)len - TICK_FRAME) != 0)
		return XDP_DROP;
	return XDP_TX;
}

SEC("spine/applet/tick")
int fc_tick(struct xdp_md *ctx)
{
	struct state *s = get_state();
	struct slot *slot;
	__u32 k = 0, len;
	__u64 now;

	if (!s)
		return XDP_DROP;
	if (s->need_ack && s->have_tmpl) {
		struct tmpl *t = bpf_map_lookup_elem(&tmpl, &k);
		struct {
			struct tmpl t;
			struct fc fc;
		} __attribute__((packed)) ack;

		if (!t)
			return XDP_DROP;
		__builtin_memcpy(&ack.t, t, sizeof(ack.t));
		ack.fc.type = FC_ACK;
		ack.fc.pad[0] = ack.fc.pad[1] = ack.fc.pad[2] = 0;
		ack.fc.seq = s->expected;
		s->need_ack = 0;
		s->acks_sent++;
		return emit(ctx, &ack, sizeof(ack));
	}
	if (s->acked == s->next_seq)
		return XDP_DROP;
	now = bpf_ktime_get_ns();
	if (s->sent != s->acked && now - s->last_progress > RTO_NS) {
		s->sent = s->acked;
		s->last_progress = now;
		s->retransmits++;
	}
	if (s->sent == s->next_seq || s->sent - s->acked >= TOKENS)
		return XDP_DROP;
	k = s->sent % WINDOW_SLOTS;
	slot = bpf_map_lookup_elem(&window, &k);
	if (!slot)
		return XDP_DROP;
	len = slot->len;
	if (len < MIN_LEN || len > FRAME_MAX)
		return XDP_DROP;
	len = bounded(len);
	if (len == 0)
		return XDP_DROP;
	if (s->sent == s->acked)
		s->last_progress = now;
	s->sent++;
	s->resent++;
	return emit(ctx, slot->data, len);
}

char LICENSE[] SEC("license") = "GPL";
