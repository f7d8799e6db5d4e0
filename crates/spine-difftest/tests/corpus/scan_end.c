/* The shape of a tutorial's tail-finding loop: walk a cursor byte by byte from offset
 * 60 until it meets the packet's end (up to 1,440 passes, more than clang unrolls or
 * spine's first verification unrolls before joining), then act on the last byte and
 * count the frame's length bucket. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 16);
	__type(key, __u32);
	__type(value, __u64);
} buckets SEC(".maps");

SEC("xdp")
int scan_end(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	unsigned int off = 60, i;
	unsigned char *last;
	__u32 key;
	__u64 *n;

	for (i = 0; i < 1440; i++) {
		if (data + off > data_end)
			return XDP_PASS;
		if (data + off == data_end)
			goto found;
		off++;
	}
	return XDP_ABORTED;
found:
	last = data + (off - 1);
	key = off >> 7;
	n = bpf_map_lookup_elem(&buckets, &key);
	if (n)
		__sync_fetch_and_add(n, 1);
	if (*last == 0xff)
		return XDP_DROP;
	return off & 1 ? XDP_TX : XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
