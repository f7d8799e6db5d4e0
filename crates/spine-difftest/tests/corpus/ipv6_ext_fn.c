/* Corpus: the IPv6 extension-header walk of ipv6_ext.c in the shape of shared parsing
 * code called from a program (as latency monitors and flow exporters built on common
 * parsing helpers do): a parse function of its own, not inlined, advances a cursor held
 * in its caller's stack through the extension headers (hop-by-hop, routing,
 * destination options and mobility by `(len + 1) * 8`, AH by `(len + 2) * 4`, a
 * fragment by 8) and hands the transport protocol and ports back through an
 * out-parameter struct; the caller counts protocols per CPU and drops TCP to port 22.
 * Chains too long to follow are passed to the host. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Built twice: loops unrolled, and (-DLOOPS) kept as bounded loops. */
#ifdef LOOPS
#define UNROLL _Pragma("nounroll")
#else
#define UNROLL _Pragma("unroll")
#endif

#define MAX_EXT 6

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} l4_count SEC(".maps");

struct cursor {
	void *pos;
	void *end;
};

struct flow {
	__u32 proto;
	__u16 sport;
	__u16 dport;
};

struct ext {
	__u8 next;
	__u8 len;
};

static __always_inline int skip_ext(struct cursor *c, int next)
{
UNROLL
	for (int i = 0; i < MAX_EXT; i++) {
		struct ext *e = c->pos;

		if ((void *)(e + 1) > c->end)
			return -1;
		switch (next) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case 135:
			c->pos = (void *)e + (e->len + 1) * 8;
			break;
		case IPPROTO_AH:
			c->pos = (void *)e + (e->len + 2) * 4;
			break;
		case IPPROTO_FRAGMENT:
			c->pos = (void *)e + 8;
			break;
		default:
			return next;
		}
		next = e->next;
	}
	return -1;
}

/* 0: parsed into *f; 1: not IPv6; -1: malformed or too long a chain. */
static __attribute__((noinline)) int parse(struct cursor *c, struct flow *f)
{
	struct ethhdr *eth = c->pos;
	struct ipv6hdr *ip6;
	int proto;

	if ((void *)(eth + 1) > c->end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return 1;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > c->end)
		return -1;
	c->pos = ip6 + 1;
	proto = skip_ext(c, ip6->nexthdr);
	if (proto < 0)
		return -1;
	f->proto = proto;
	if (proto == IPPROTO_TCP || proto == IPPROTO_UDP) {
		struct udphdr *uh = c->pos;

		if ((void *)(uh + 1) > c->end)
			return -1;
		f->sport = bpf_ntohs(uh->source);
		f->dport = bpf_ntohs(uh->dest);
	}
	return 0;
}

SEC("xdp")
int ipv6_ext_fn(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	struct cursor c = { .pos = data, .end = (void *)(long)ctx->data_end };
	struct flow f = {};
	__u64 *n;
	__u32 key;
	int r = parse(&c, &f);

	if (r > 0)
		return XDP_PASS;
	if (r < 0)
		return XDP_PASS;
	key = f.proto;
	n = bpf_map_lookup_elem(&l4_count, &key);
	if (n)
		*n += 1;
	if (f.proto == IPPROTO_TCP) {
		/* The TCP header again, through the cursor the parser advanced. */
		struct tcphdr *th = c.pos;

		if ((void *)(th + 1) > (void *)(long)ctx->data_end)
			return XDP_DROP;
		if (f.dport == 22 && th->dest == bpf_htons(22))
			return XDP_DROP;
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
