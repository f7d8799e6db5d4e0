/* An IP router: IPv4 and IPv6 forwarded by bpf_fib_lookup, TTL decremented, MACs rewritten, redirected to the egress port.
 *
 * The fast path of a software router, with the slow path left to the host's stack.
 * Ethernet frames, untagged or with one 802.1Q/802.1ad tag, carrying IPv4 or IPv6 are
 * looked up in the FIB (bpf_fib_lookup, from the port the frame arrived on). A
 * forwarded packet has its TTL or hop limit decremented (the IPv4 checksum updated
 * incrementally, RFC 1624), its MACs set to the egress port's and the next hop's, a
 * VLAN tag removed (the FIB answers for the untagged egress device), and is
 * redirected to the egress port.
 *
 * Everything the fast path does not handle goes up (XDP_PASS), where the host's stack
 * answers it as a router does: TTL or hop limit expiring (ICMP time exceeded), the
 * router's own addresses and other local routes, ARP and neighbour discovery, a next
 * hop without a neighbour entry (the stack resolves it), unreachable and prohibited
 * destinations (ICMP unreachable), packets too big for the egress MTU (ICMP
 * fragmentation needed / packet too big), IPv4 options and IPv6 hop-by-hop options,
 * fragments, multicast and broadcast, stacked VLAN tags and every other EtherType.
 * Blackhole routes drop.
 *
 * Malformed frames (a header cut short, a wrong IP version, an IPv4 header length
 * under 20 bytes, a length field past the end of the frame) are dropped. Every
 * outcome is counted in `router_stats`, per CPU.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff
#define IPV6_FLOWINFO_MASK 0x0fffffff
#define NEXTHDR_HOP 0
#define NEXTHDR_FRAGMENT 44
#define VLAN_HLEN 4

enum router_stat {
	STAT_FORWARDED,
	STAT_MALFORMED,
	STAT_BLACKHOLE,
	STAT_TTL_EXPIRED,
	STAT_LOCAL,        /* own address or another route the FIB does not forward */
	STAT_NO_NEIGH,
	STAT_UNREACHABLE,  /* unreachable, prohibited, forwarding disabled */
	STAT_FRAG_NEEDED,
	STAT_SLOW_PATH,    /* options, fragments, multicast, ARP/ND, other EtherTypes */
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} router_stats SEC(".maps");

static __always_inline int count(__u32 stat, int verdict)
{
	__u64 *v = bpf_map_lookup_elem(&router_stats, &stat);

	if (v)
		*v += 1;
	return verdict;
}

/* The verdict for a lookup that did not succeed. */
static __always_inline int not_forwarded(long rc)
{
	switch (rc) {
	case BPF_FIB_LKUP_RET_BLACKHOLE:
		return count(STAT_BLACKHOLE, XDP_DROP);
	case BPF_FIB_LKUP_RET_UNREACHABLE:
	case BPF_FIB_LKUP_RET_PROHIBIT:
	case BPF_FIB_LKUP_RET_FWD_DISABLED:
		return count(STAT_UNREACHABLE, XDP_PASS);
	case BPF_FIB_LKUP_RET_NO_NEIGH:
		return count(STAT_NO_NEIGH, XDP_PASS);
	case BPF_FIB_LKUP_RET_FRAG_NEEDED:
		return count(STAT_FRAG_NEEDED, XDP_PASS);
	default:
		return count(STAT_LOCAL, XDP_PASS);
	}
}

/* ip_decrease_ttl: the checksum gains what the TTL loses (0x0100 in its word). */
static __always_inline void decrease_ttl(struct iphdr *ip)
{
	__u32 check = (__u32)ip->check + (__u32)bpf_htons(0x0100);

	ip->check = (__u16)(check + (check >= 0xffff));
	ip->ttl--;
}

/* The Ethernet header for the egress port, written `off` bytes into the frame (4 past
 * a tag that is being removed, whose inner EtherType is then already in place), and
 * the redirect. */
static __always_inline int forward(struct xdp_md *ctx, struct bpf_fib_lookup *fib, int off)
{
	void *data;
	void *data_end;
	struct ethhdr *eth;

	if (off && bpf_xdp_adjust_head(ctx, off))
		return count(STAT_MALFORMED, XDP_ABORTED);
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	eth = data;
	if ((void *)(eth + 1) > data_end)
		return count(STAT_MALFORMED, XDP_ABORTED);
	__builtin_memcpy(eth->h_dest, fib->dmac, ETH_ALEN);
	__builtin_memcpy(eth->h_source, fib->smac, ETH_ALEN);
	count(STAT_FORWARDED, 0);
	return bpf_redirect(fib->ifindex, 0);
}

static __always_inline int route_v4(struct xdp_md *ctx, struct iphdr *ip, void *data_end,
				    int vlan)
{
	struct bpf_fib_lookup fib = {};
	__u16 tot_len;
	long rc;

	if ((void *)(ip + 1) > data_end || ip->version != 4 || ip->ihl < 5)
		return count(STAT_MALFORMED, XDP_DROP);
	tot_len = bpf_ntohs(ip->tot_len);
	if (tot_len < ip->ihl * 4 || (void *)ip + tot_len > data_end)
		return count(STAT_MALFORMED, XDP_DROP);
	if (ip->ihl != 5 || ip->frag_off & bpf_htons(IP_MF | IP_OFFSET))
		return count(STAT_SLOW_PATH, XDP_PASS);
	/* Multicast, limited broadcast and class E: not for the FIB's unicast routes. */
	if ((bpf_ntohl(ip->daddr) >> 28) >= 0xe)
		return count(STAT_SLOW_PATH, XDP_PASS);
	if (ip->ttl <= 1)
		return count(STAT_TTL_EXPIRED, XDP_PASS);

	fib.family = AF_INET;
	fib.tos = ip->tos;
	fib.l4_protocol = ip->protocol;
	fib.tot_len = tot_len;
	fib.ifindex = ctx->ingress_ifindex;
	fib.ipv4_src = ip->saddr;
	fib.ipv4_dst = ip->daddr;
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return not_forwarded(rc);
	decrease_ttl(ip);
	return forward(ctx, &fib, vlan ? VLAN_HLEN : 0);
}

static __always_inline int route_v6(struct xdp_md *ctx, struct ipv6hdr *ip6, void *data_end,
				    int vlan)
{
	struct bpf_fib_lookup fib = {};
	long rc;

	if ((void *)(ip6 + 1) > data_end || ip6->version != 6)
		return count(STAT_MALFORMED, XDP_DROP);
	if ((void *)(ip6 + 1) + bpf_ntohs(ip6->payload_len) > data_end)
		return count(STAT_MALFORMED, XDP_DROP);
	/* Multicast (neighbour discovery among it), hop-by-hop options (a router must
	 * read them: router alert, jumbograms) and fragments go up. */
	if (ip6->daddr.s6_addr[0] == 0xff || ip6->nexthdr == NEXTHDR_HOP ||
	    ip6->nexthdr == NEXTHDR_FRAGMENT)
		return count(STAT_SLOW_PATH, XDP_PASS);
	if (ip6->hop_limit <= 1)
		return count(STAT_TTL_EXPIRED, XDP_PASS);

	fib.family = AF_INET6;
	fib.flowinfo = *(__be32 *)ip6 & bpf_htonl(IPV6_FLOWINFO_MASK);
	fib.l4_protocol = ip6->nexthdr;
	fib.tot_len = sizeof(*ip6) + bpf_ntohs(ip6->payload_len);
	fib.ifindex = ctx->ingress_ifindex;
	__builtin_memcpy(fib.ipv6_src, &ip6->saddr, sizeof(fib.ipv6_src));
	__builtin_memcpy(fib.ipv6_dst, &ip6->daddr, sizeof(fib.ipv6_dst));
	rc = bpf_fib_lookup(ctx, &fib, sizeof(fib), 0);
	if (rc != BPF_FIB_LKUP_RET_SUCCESS)
		return not_forwarded(rc);
	ip6->hop_limit--;
	return forward(ctx, &fib, vlan ? VLAN_HLEN : 0);
}

SEC("xdp")
int router(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	void *l3 = eth + 1;
	__u16 proto;
	int vlan = 0;

	if (l3 > data_end)
		return count(STAT_MALFORMED, XDP_DROP);
	proto = bpf_ntohs(eth->h_proto);
	if (proto == ETH_P_8021Q || proto == ETH_P_8021AD) {
		__be16 *inner = l3 + 2;

		if ((void *)(inner + 1) > data_end)
			return count(STAT_MALFORMED, XDP_DROP);
		proto = bpf_ntohs(*inner);
		l3 += VLAN_HLEN;
		vlan = 1;
	}
	switch (proto) {
	case ETH_P_IP:
		return route_v4(ctx, l3, data_end, vlan);
	case ETH_P_IPV6:
		return route_v6(ctx, l3, data_end, vlan);
	default:
		/* ARP, stacked tags, and everything else. */
		return count(STAT_SLOW_PATH, XDP_PASS);
	}
}

char _license[] SEC("license") = "GPL";
