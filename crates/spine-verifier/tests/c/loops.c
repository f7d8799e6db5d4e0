/* Loops as clang emits them without unrolling: the kernel verifies each by walking
 * every iteration; spine by joining and widening at the loop head. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64[16]);
} hist SEC(".maps");

SEC("xdp")
int loops(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u8 *p = data;
	__u32 key = 0, sum = 0;
	__u64 *h;
	int i;

	/* Sum the first 32 bytes, stopping at the end of the packet. */
#pragma clang loop unroll(disable)
	for (i = 0; i < 32; i++) {
		if ((void *)(p + i + 1) > data_end)
			break;
		sum += p[i];
	}

	h = bpf_map_lookup_elem(&hist, &key);
	if (!h)
		return XDP_PASS;
	/* Age every bucket. */
#pragma clang loop unroll(disable)
	for (i = 0; i < 16; i++)
		h[i] >>= 1;
	h[sum & 15]++;
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
