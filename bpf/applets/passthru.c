/* The raw pass-through applet: doTx and doRx let every frame through unchanged and
 * count the frames and bytes they saw, so an application can watch its endpoint's
 * traffic from the adapter's maps (counts[0]: transmitted, counts[1]: received).
 *
 * The object's XDP program passes everything too: an object is loaded by its XDP
 * program, and this one may also be attached to a port harmlessly. */
#include <spine_helpers.h>

struct count {
	__u64 frames;
	__u64 bytes;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, struct count);
} counts SEC(".maps");

static __always_inline int count(struct xdp_md *ctx, __u32 k)
{
	struct count *c = bpf_map_lookup_elem(&counts, &k);

	if (c) {
		__sync_fetch_and_add(&c->frames, 1);
		__sync_fetch_and_add(&c->bytes, ctx->data_end - ctx->data);
	}
	return XDP_PASS;
}

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("spine/applet/tx")
int do_tx(struct xdp_md *ctx)
{
	return count(ctx, 0);
}

SEC("spine/applet/rx")
int do_rx(struct xdp_md *ctx)
{
	return count(ctx, 1);
}

char LICENSE[] SEC("license") = "GPL";
