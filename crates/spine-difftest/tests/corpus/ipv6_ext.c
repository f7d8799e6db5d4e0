/* Corpus: IPv6 extension headers walked in a bounded loop (hop-by-hop, routing,
 * destination options, fragment), as firewalls and load balancers do; the transport
 * protocol found is counted per CPU, fragments and chains too long to follow are passed
 * to the host, TCP to port 22 is dropped. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Built twice: loops unrolled, and (-DLOOPS) kept as bounded loops. */
#ifdef LOOPS
#define UNROLL _Pragma("nounroll")
#else
#define UNROLL _Pragma("unroll")
#endif

#define MAX_EXT 8

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} l4_count SEC(".maps");

struct ext {
	__u8 next;
	__u8 len;
};

SEC("xdp")
int ipv6_ext(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct ipv6hdr *ip6;
	void *cur;
	__u8 next;

	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return XDP_PASS;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > end)
		return XDP_DROP;
	next = ip6->nexthdr;
	cur = ip6 + 1;
UNROLL
	for (int i = 0; i < MAX_EXT; i++) {
		struct ext *e = cur;

		if (next == IPPROTO_FRAGMENT)
			return XDP_PASS;
		if (next != IPPROTO_HOPOPTS && next != IPPROTO_ROUTING && next != IPPROTO_DSTOPTS)
			break;
		if ((void *)(e + 1) > end)
			return XDP_DROP;
		next = e->next;
		cur += (e->len + 1) * 8;
	}
	if (next == IPPROTO_HOPOPTS || next == IPPROTO_ROUTING || next == IPPROTO_DSTOPTS)
		return XDP_PASS;
	__u32 key = next;
	__u64 *n = bpf_map_lookup_elem(&l4_count, &key);
	if (n)
		*n += 1;
	if (next == IPPROTO_TCP) {
		struct tcphdr *th = cur;

		if ((void *)(th + 1) > end)
			return XDP_DROP;
		if (th->dest == bpf_htons(22))
			return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
