/* A header-walking packet filter in the shape of the public XDP filters: a cursor
 * struct advanced by small parse functions, up to two VLAN tags, IPv4 with options
 * (`ihl * 4`), IPv6 with up to six extension headers walked in an unrolled loop, TCP
 * with options (`doff * 4`), UDP with its length checked. The bounds check is made on
 * one pointer and the fields read through another derived from the same base (the
 * address header parsed before the walk), which the verifier must connect. Rules come
 * from maps keyed by port and by address; counters are per CPU. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define RULE_DENY 1
#define RULE_TCP 2
#define RULE_UDP 4
#define MAX_VLANS 2
#define MAX_EXT 6

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} port_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u32);
	__type(value, __u64);
} v4_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, struct in6_addr);
	__type(value, __u64);
} v6_rules SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u64);
} verdicts SEC(".maps");

struct cursor {
	void *pos;
};

struct vlan_tag {
	__be16 tci;
	__be16 proto;
};

struct ext_hdr {
	__u8 nexthdr;
	__u8 len;
};

static __always_inline int parse_eth(struct cursor *c, void *end, struct ethhdr **eth)
{
	struct ethhdr *e = c->pos;
	struct vlan_tag *v;
	__u16 proto;
	int i;

	if ((void *)(e + 1) > end)
		return -1;
	c->pos = e + 1;
	*eth = e;
	proto = e->h_proto;
#pragma unroll
	for (i = 0; i < MAX_VLANS; i++) {
		if (proto != bpf_htons(ETH_P_8021Q) && proto != bpf_htons(ETH_P_8021AD))
			break;
		v = c->pos;
		if ((void *)(v + 1) > end)
			return -1;
		proto = v->proto;
		c->pos = v + 1;
	}
	return proto;
}

static __always_inline int parse_ip4(struct cursor *c, void *end, struct iphdr **ip)
{
	struct iphdr *h = c->pos;
	int size;

	if ((void *)(h + 1) > end)
		return -1;
	size = h->ihl * 4;
	if (size < (int)sizeof(*h))
		return -1;
	if (c->pos + size > end)
		return -1;
	c->pos += size;
	*ip = h;
	return h->protocol;
}

/* Skips the extension headers; returns the upper-layer protocol. */
static __always_inline int skip_ext(struct cursor *c, void *end, __u8 next)
{
	struct ext_hdr *x;
	int i;

#pragma unroll
	for (i = 0; i < MAX_EXT; i++) {
		x = c->pos;
		if ((void *)(x + 1) > end)
			return -1;
		switch (next) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_DSTOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_MH:
			c->pos = (char *)x + (x->len + 1) * 8;
			next = x->nexthdr;
			break;
		case IPPROTO_AH:
			c->pos = (char *)x + (x->len + 2) * 4;
			next = x->nexthdr;
			break;
		case IPPROTO_FRAGMENT:
			c->pos = (char *)x + 8;
			next = x->nexthdr;
			break;
		default:
			return next;
		}
	}
	return -1;
}

static __always_inline int parse_ip6(struct cursor *c, void *end, struct ipv6hdr **ip)
{
	struct ipv6hdr *h = c->pos;

	if ((void *)(h + 1) > end)
		return -1;
	c->pos = h + 1;
	*ip = h;
	return skip_ext(c, end, h->nexthdr);
}

static __always_inline int parse_tcp(struct cursor *c, void *end, struct tcphdr **th)
{
	struct tcphdr *h = c->pos;
	int len;

	if ((void *)(h + 1) > end)
		return -1;
	len = h->doff * 4;
	if (len < (int)sizeof(*h))
		return -1;
	if (c->pos + len > end)
		return -1;
	c->pos += len;
	*th = h;
	return len;
}

static __always_inline int parse_udp(struct cursor *c, void *end, struct udphdr **uh)
{
	struct udphdr *h = c->pos;
	int len;

	if ((void *)(h + 1) > end)
		return -1;
	c->pos = h + 1;
	len = bpf_ntohs(h->len) - sizeof(*h);
	if (len < 0)
		return -1;
	*uh = h;
	return len;
}

static __always_inline __u32 count(__u32 action)
{
	__u64 *n = bpf_map_lookup_elem(&verdicts, &action);

	if (n)
		*n += 1;
	return action;
}

static __always_inline int rule(void *map, void *key, __u64 need)
{
	__u64 *r = bpf_map_lookup_elem(map, key);

	return r && (*r & need) == need;
}

SEC("xdp")
int hdr_filter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct cursor c = { .pos = data };
	struct ethhdr *eth;
	struct iphdr *ip4 = 0;
	struct ipv6hdr *ip6 = 0;
	struct tcphdr *th;
	struct udphdr *uh;
	__u32 port;
	int proto, l4;

	proto = parse_eth(&c, end, &eth);
	if (proto == bpf_htons(ETH_P_IP))
		l4 = parse_ip4(&c, end, &ip4);
	else if (proto == bpf_htons(ETH_P_IPV6))
		l4 = parse_ip6(&c, end, &ip6);
	else
		return count(XDP_PASS);
	if (l4 < 0)
		return count(XDP_ABORTED);

	if (l4 == IPPROTO_TCP) {
		if (parse_tcp(&c, end, &th) < 0)
			return count(XDP_ABORTED);
		port = bpf_ntohs(th->dest);
		if (rule(&port_rules, &port, RULE_DENY | RULE_TCP))
			return count(XDP_DROP);
		port = bpf_ntohs(th->source) | 0x10000;
		if (rule(&port_rules, &port, RULE_DENY | RULE_TCP))
			return count(XDP_DROP);
	} else if (l4 == IPPROTO_UDP) {
		if (parse_udp(&c, end, &uh) < 0)
			return count(XDP_ABORTED);
		port = bpf_ntohs(uh->dest);
		if (rule(&port_rules, &port, RULE_DENY | RULE_UDP))
			return count(XDP_DROP);
	}

	/* Back to the address header, parsed before the walk. */
	if (ip4) {
		__u32 a = ip4->saddr;

		if (rule(&v4_rules, &a, RULE_DENY))
			return count(XDP_DROP);
		a = ip4->daddr;
		if (rule(&v4_rules, &a, RULE_DENY))
			return count(XDP_DROP);
	} else if (ip6) {
		struct in6_addr a = ip6->saddr;

#ifdef UNSAFE_NEIGHBOUR
		/* The walk proved only two bytes past the fixed header when the next header
		 * is none it knows: four is a read past the packet on a short one. */
		a.in6_u.u6_addr32[0] ^= *(__u32 *)(ip6 + 1);
#endif

		if (rule(&v6_rules, &a, RULE_DENY))
			return count(XDP_DROP);
		a = ip6->daddr;
		if (rule(&v6_rules, &a, RULE_DENY))
			return count(XDP_DROP);
	}
	return count(XDP_PASS);
}

char _license[] SEC("license") = "GPL";
