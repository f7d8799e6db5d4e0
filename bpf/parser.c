/* Parses Ethernet, VLAN, ARP, IPv4, IPv6 and TCP/UDP/ICMP headers; drops malformed frames.
 *
 * The header parser every firewall starts with. It walks the frame layer by layer and
 * checks each header as a receiving stack would: present in full, version and header
 * length sane, IP lengths consistent with the frame (Ethernet padding may follow the
 * datagram, so the frame may be longer, never shorter). A frame that fails a check is
 * counted as malformed and dropped; everything else is counted per protocol and passed.
 *
 * One filter rule: UDP from the chargen (19) or memcached (11211) ports, reflection-
 * amplification traffic that no host here asks for, and UDP to any destination port the
 * control plane put into `blocked_udp_ports`, is dropped.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <linux/icmpv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define VLAN_MAX_DEPTH 2	/* one tag, or an 802.1ad S-tag and a C-tag (QinQ) */
#define IPV6_MAX_EXT_HDRS 4	/* extension headers looked through before giving up */

#define IP_MF 0x2000		/* IPv4: more fragments */
#define IP_OFFSET 0x1fff	/* IPv4: fragment offset */
#define IP6_MF 0x0001		/* IPv6 fragment header: more fragments */
#define IP6_OFFSET 0xfff8	/* IPv6 fragment header: fragment offset */

#define PORT_CHARGEN 19
#define PORT_MEMCACHED 11211

/* 802.1Q / 802.1ad tag (the kernel's struct vlan_hdr is not UAPI). */
struct vlan_hdr {
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

/* ARP fixed header (the UAPI <linux/if_arp.h> drags in libc headers). */
struct arphdr {
	__be16 ar_hrd;
	__be16 ar_pro;
	__u8 ar_hln;
	__u8 ar_pln;
	__be16 ar_op;
};

/* ICMP header: <linux/icmp.h> includes libc's <sys/socket.h>, which has no BPF target. */
struct icmphdr {
	__u8 type;
	__u8 code;
	__sum16 checksum;
	__be32 rest;		/* echo id and sequence, gateway, MTU, ... */
};

/* IPv6 fragment header (RFC 8200, 4.5). */
struct ipv6_frag_hdr {
	__u8 nexthdr;
	__u8 reserved;
	__be16 frag_off;
	__be32 identification;
};

/* Counters in `proto_stats`. A frame counts once per layer it has. */
enum proto_stat {
	STAT_FRAMES,
	STAT_VLAN,		/* per tag */
	STAT_ARP,
	STAT_IPV4,
	STAT_IPV6,
	STAT_IP_FRAGMENT,	/* passed without looking at L4: reassembly is the host's job */
	STAT_TCP,
	STAT_UDP,
	STAT_ICMP,
	STAT_ICMPV6,
	STAT_OTHER_L3,
	STAT_OTHER_L4,
	STAT_MALFORMED,
	STAT_BLOCKED,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} proto_stats SEC(".maps");

/* UDP destination ports (host byte order) to drop, filled by the control plane. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 64);
	__type(key, __u16);
	__type(value, __u8);
} blocked_udp_ports SEC(".maps");

static __always_inline void count(__u32 stat)
{
	__u64 *value = bpf_map_lookup_elem(&proto_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, 1);
}

static __always_inline int malformed(void)
{
	count(STAT_MALFORMED);
	return XDP_DROP;
}

static __always_inline int udp_blocked(const struct udphdr *uh)
{
	__u16 sport = bpf_ntohs(uh->source);
	__u16 dport = bpf_ntohs(uh->dest);

	if (sport == PORT_CHARGEN || sport == PORT_MEMCACHED)
		return 1;
	return bpf_map_lookup_elem(&blocked_udp_ports, &dport) != NULL;
}

/* The transport header at the cursor; `l4_len` is how many bytes the IP header says the
 * transport segment has (already checked to fit in the frame). */
static __always_inline int parse_l4(struct spine_cursor *cur, __u8 proto, __u32 l4_len,
				    int is_ipv6)
{
	if (proto == IPPROTO_TCP) {
		struct tcphdr *th = SPINE_PULL(cur, struct tcphdr);
		__u32 doff;

		if (!th || l4_len < sizeof(*th))
			return malformed();
		doff = th->doff * 4;
		if (doff < sizeof(*th) || doff > l4_len)
			return malformed();
		count(STAT_TCP);
		return XDP_PASS;
	}
	if (proto == IPPROTO_UDP) {
		struct udphdr *uh = SPINE_PULL(cur, struct udphdr);
		__u32 len;

		if (!uh || l4_len < sizeof(*uh))
			return malformed();
		len = bpf_ntohs(uh->len);
		if (len < sizeof(*uh) || len > l4_len)
			return malformed();
		count(STAT_UDP);
		if (udp_blocked(uh)) {
			count(STAT_BLOCKED);
			return XDP_DROP;
		}
		return XDP_PASS;
	}
	if ((proto == IPPROTO_ICMP && !is_ipv6) || (proto == IPPROTO_ICMPV6 && is_ipv6)) {
		/* Type, code, checksum and the 4-byte rest-of-header both versions have. */
		if (!SPINE_PULL(cur, struct icmphdr) || l4_len < sizeof(struct icmphdr))
			return malformed();
		count(is_ipv6 ? STAT_ICMPV6 : STAT_ICMP);
		return XDP_PASS;
	}
	count(STAT_OTHER_L4);
	return XDP_PASS;
}

static __always_inline int parse_ipv4(struct spine_cursor *cur)
{
	struct iphdr *iph = SPINE_PULL(cur, struct iphdr);
	__u32 hdr_len, tot_len;

	if (!iph)
		return malformed();
	hdr_len = iph->ihl * 4;
	if (iph->version != 4 || hdr_len < sizeof(*iph))
		return malformed();
	/* Step over the options, if any. */
	if (!spine_pull(cur, hdr_len - sizeof(*iph)))
		return malformed();
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < hdr_len || tot_len - hdr_len > spine_remaining(cur))
		return malformed();
	count(STAT_IPV4);

	if (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET)) {
		count(STAT_IP_FRAGMENT);
		return XDP_PASS;
	}
	return parse_l4(cur, iph->protocol, tot_len - hdr_len, 0);
}

static __always_inline int ipv6_is_ext_hdr(__u8 nexthdr)
{
	return nexthdr == IPPROTO_HOPOPTS || nexthdr == IPPROTO_ROUTING ||
	       nexthdr == IPPROTO_DSTOPTS || nexthdr == IPPROTO_FRAGMENT;
}

static __always_inline int parse_ipv6(struct spine_cursor *cur)
{
	struct ipv6hdr *ip6h = SPINE_PULL(cur, struct ipv6hdr);
	__u32 payload_len;
	__u8 nexthdr;

	if (!ip6h || ip6h->version != 6)
		return malformed();
	payload_len = bpf_ntohs(ip6h->payload_len);
	if (payload_len > spine_remaining(cur))
		return malformed();
	count(STAT_IPV6);

	nexthdr = ip6h->nexthdr;
#pragma unroll
	for (int i = 0; i < IPV6_MAX_EXT_HDRS; i++) {
		struct ipv6_opt_hdr *opt;
		__u32 len;

		if (!ipv6_is_ext_hdr(nexthdr))
			break;
		if (nexthdr == IPPROTO_FRAGMENT) {
			struct ipv6_frag_hdr *fh = SPINE_PULL(cur, struct ipv6_frag_hdr);

			if (!fh || payload_len < sizeof(*fh))
				return malformed();
			if (fh->frag_off & bpf_htons(IP6_MF | IP6_OFFSET)) {
				count(STAT_IP_FRAGMENT);
				return XDP_PASS;
			}
			/* An atomic fragment (RFC 6946): the whole datagram is here. */
			payload_len -= sizeof(*fh);
			nexthdr = fh->nexthdr;
			continue;
		}
		/* Hop-by-hop, routing and destination options: length in 8-octet units,
		 * not counting the first 8. */
		opt = SPINE_PULL(cur, struct ipv6_opt_hdr);
		if (!opt)
			return malformed();
		len = (opt->hdrlen + 1) * 8;
		if (len > payload_len || !spine_pull(cur, len - sizeof(*opt)))
			return malformed();
		payload_len -= len;
		nexthdr = opt->nexthdr;
	}
	if (ipv6_is_ext_hdr(nexthdr)) {
		/* A longer chain than we look through: let the host decide. */
		count(STAT_OTHER_L4);
		return XDP_PASS;
	}
	return parse_l4(cur, nexthdr, payload_len, 1);
}

static __always_inline int parse_arp(struct spine_cursor *cur)
{
	struct arphdr *arp = SPINE_PULL(cur, struct arphdr);

	if (!arp)
		return malformed();
	/* Sender and target hardware and protocol addresses follow. */
	if (!spine_pull(cur, 2 * (arp->ar_hln + arp->ar_pln)))
		return malformed();
	count(STAT_ARP);
	return XDP_PASS;
}

SEC("xdp")
int parser(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth;
	__be16 proto;

	count(STAT_FRAMES);
	eth = SPINE_PULL(&cur, struct ethhdr);
	if (!eth)
		return malformed();
	proto = eth->h_proto;

#pragma unroll
	for (int i = 0; i < VLAN_MAX_DEPTH; i++) {
		struct vlan_hdr *vh;

		if (!spine_eth_is_vlan(proto))
			break;
		vh = SPINE_PULL(&cur, struct vlan_hdr);
		if (!vh)
			return malformed();
		count(STAT_VLAN);
		proto = vh->h_vlan_encapsulated_proto;
	}

	if (proto == bpf_htons(ETH_P_IP))
		return parse_ipv4(&cur);
	if (proto == bpf_htons(ETH_P_IPV6))
		return parse_ipv6(&cur);
	if (proto == bpf_htons(ETH_P_ARP))
		return parse_arp(&cur);
	/* Anything else, including a third VLAN tag, is not ours to judge. */
	count(STAT_OTHER_L3);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
