/* Corpus: tunnel decapsulation as load balancers' and gateways' XDP programs do it:
 * IPIP, GRE (no key, checksum or sequence) and GUE (UDP port 6080, a 4-byte header)
 * outer headers are removed with bpf_xdp_adjust_head and the Ethernet header rebuilt in
 * front of the inner packet; the inner packet goes back out. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define GUE_PORT 6080

struct grehdr {
	__be16 flags;
	__be16 proto;
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} decapped SEC(".maps");

static __always_inline int strip(struct xdp_md *ctx, int outer, __u32 kind)
{
	struct ethhdr eth_copy, *eth;
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 *n;

	if (data + sizeof(struct ethhdr) > end)
		return XDP_DROP;
	__builtin_memcpy(&eth_copy, data, sizeof(eth_copy));
	if (bpf_xdp_adjust_head(ctx, outer))
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	__builtin_memcpy(eth, &eth_copy, sizeof(*eth));
	eth->h_proto = bpf_htons(ETH_P_IP);
	n = bpf_map_lookup_elem(&decapped, &kind);
	if (n)
		__sync_fetch_and_add(n, 1);
	return XDP_TX;
}

SEC("xdp")
int decap(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	__u32 ihl;

	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return XDP_DROP;
	ihl = ip->ihl * 4;
	if (ihl != sizeof(*ip))
		return XDP_PASS;
	if (ip->protocol == IPPROTO_IPIP)
		return strip(ctx, sizeof(*ip), 0);
	if (ip->protocol == IPPROTO_GRE) {
		struct grehdr *gre = (void *)(ip + 1);

		if ((void *)(gre + 1) > end)
			return XDP_DROP;
		if (gre->flags != 0 || gre->proto != bpf_htons(ETH_P_IP))
			return XDP_PASS;
		return strip(ctx, sizeof(*ip) + sizeof(*gre), 1);
	}
	if (ip->protocol == IPPROTO_UDP) {
		struct udphdr *udp = (void *)(ip + 1);
		__u8 *gue = (void *)(udp + 1);

		if ((void *)(gue + 4) > end)
			return XDP_DROP;
		if (udp->dest != bpf_htons(GUE_PORT) || (gue[0] & 0xc0) != 0)
			return XDP_PASS;
		return strip(ctx, sizeof(*ip) + sizeof(*udp) + 4, 2);
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
