/* A cursor kept in a stack struct walks IPv6 extension headers in a loop clang does not
 * unroll; bpf_xdp_load_bytes fills a stack buffer; bpf_for_each_map_elem sums a map. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} totals SEC(".maps");

struct bpf_map;

static __u64 sum_cb(struct bpf_map *map, __u32 *key, __u64 *val, __u64 *ctx)
{
	*ctx += *val;
	return 0;
}

SEC("xdp")
int walk(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	struct ipv6hdr *ip6;
	__u8 nexthdr, head[8];
	__u64 sum = 0;
	int i;

	bpf_for_each_map_elem(&totals, sum_cb, &sum, 0);
	if (bpf_xdp_load_bytes(ctx, 0, head, sizeof(head)) == 0 && head[0] == 0xff)
		return XDP_DROP;
	if (!eth || eth->h_proto != bpf_htons(ETH_P_IPV6))
		return sum > 1000 ? XDP_DROP : XDP_PASS;
	ip6 = SPINE_PULL(&cur, struct ipv6hdr);
	if (!ip6)
		return XDP_DROP;
	nexthdr = ip6->nexthdr;
#pragma clang loop unroll(disable)
	for (i = 0; i < 8; i++) {
		struct ipv6_opt_hdr *opt;

		if (nexthdr != IPPROTO_HOPOPTS && nexthdr != IPPROTO_DSTOPTS &&
		    nexthdr != IPPROTO_ROUTING)
			break;
		opt = SPINE_PULL(&cur, struct ipv6_opt_hdr);
		if (!opt)
			return XDP_DROP;
		if (!spine_pull(&cur, opt->hdrlen * 8 + 6))
			return XDP_DROP;
		nexthdr = opt->nexthdr;
	}
	return nexthdr == IPPROTO_UDP ? XDP_PASS : XDP_DROP;
}

char LICENSE[] SEC("license") = "GPL";
