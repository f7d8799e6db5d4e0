/* Copies a variable-length option into a stack buffer with a bounded length, edits the
 * packet after bpf_xdp_adjust_head, and walks IPv4 options with a loop. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u8[64]);
} scratch SEC(".maps");

SEC("xdp")
int copy(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);
	__u32 key = 0, len, i;
	__u8 *buf, *opt;

	if ((void *)(iph + 1) > data_end || eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	len = iph->ihl * 4;
	if (len < sizeof(*iph))
		return XDP_DROP;
	buf = bpf_map_lookup_elem(&scratch, &key);
	if (!buf)
		return XDP_PASS;
	/* Copy the options byte by byte (at most 40). */
	opt = (__u8 *)(iph + 1);
#pragma clang loop unroll(disable)
	for (i = 0; i < len - sizeof(*iph) && i < 40; i++) {
		if ((void *)(opt + i + 1) > data_end)
			break;
		buf[i] = opt[i];
	}
	/* Push an outer Ethernet header. */
	if (bpf_xdp_adjust_head(ctx, -(int)sizeof(struct ethhdr)))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 2) > data_end)
		return XDP_DROP;
	__builtin_memcpy(eth, eth + 1, sizeof(*eth));
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
