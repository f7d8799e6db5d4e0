/* Destination NAT for IPv4: decrements the TTL, rewrites the destination address, fixes checksums.
 *
 * A load-balancer style rewrite. The destination address is looked up in `nat_rules`
 * (filled by the control plane); without a rule the datagram goes to the default
 * backend. As a router would, the TTL is decremented and a datagram whose TTL would
 * expire is dropped (the host, not the fast path, sends ICMP Time Exceeded).
 *
 * Both changes are folded into the IPv4 header checksum incrementally (RFC 1624), without
 * summing the header again. TCP and UDP checksums cover the destination address through
 * the pseudo-header; their update is computed with bpf_csum_diff(). The rewritten frame
 * goes back out of the port it came in on (XDP_TX). Frames that are not IPv4 pass;
 * truncated or malformed IPv4 headers are dropped.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define IP_OFFSET 0x1fff	/* IPv4 fragment offset */

/* 198.51.100.10 (TEST-NET-2): where traffic without a rule goes. */
#define DEFAULT_BACKEND 0xc633640a

struct nat_rule {
	__be32 to_addr;
};

/* Destination address (network byte order) -> the address to rewrite it to. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __be32);
	__type(value, struct nat_rule);
} nat_rules SEC(".maps");

SEC("xdp")
int rewrite(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	struct nat_rule *rule;
	struct iphdr *iph;
	__be32 old_daddr, new_daddr;
	__u16 *ttl_word, old_word;
	__u32 hdr_len, tot_len;
	__s64 diff;

	if (!eth)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;

	iph = SPINE_PULL(&cur, struct iphdr);
	if (!iph)
		return XDP_DROP;
	hdr_len = iph->ihl * 4;
	if (iph->version != 4 || hdr_len < sizeof(*iph))
		return XDP_DROP;
	if (!spine_pull(&cur, hdr_len - sizeof(*iph)))
		return XDP_DROP;
	/* The datagram must fit in the frame (Ethernet padding may follow it). */
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < hdr_len || tot_len - hdr_len > spine_remaining(&cur))
		return XDP_DROP;
	if (iph->ttl <= 1)
		return XDP_DROP;

	old_daddr = iph->daddr;
	rule = bpf_map_lookup_elem(&nat_rules, &old_daddr);
	new_daddr = rule ? rule->to_addr : bpf_htonl(DEFAULT_BACKEND);

	/* The pseudo-header change, once, for whichever transport checksum needs it. */
	diff = bpf_csum_diff(&old_daddr, sizeof(old_daddr), &new_daddr, sizeof(new_daddr), 0);
	if (diff < 0)
		return XDP_ABORTED;

	/* Only the first fragment carries the transport header. */
	if (!(iph->frag_off & bpf_htons(IP_OFFSET))) {
		if (iph->protocol == IPPROTO_TCP) {
			struct tcphdr *th = SPINE_PULL(&cur, struct tcphdr);

			if (!th)
				return XDP_DROP;
			th->check = spine_csum_apply(th->check, diff);
		} else if (iph->protocol == IPPROTO_UDP) {
			struct udphdr *uh = SPINE_PULL(&cur, struct udphdr);

			if (!uh)
				return XDP_DROP;
			/* Zero means "no checksum" (RFC 768); a computed zero is sent as ~0. */
			if (uh->check) {
				__u16 check = spine_csum_apply(uh->check, diff);

				uh->check = check ? check : 0xffff;
			}
		}
	}

	/* TTL and protocol share a 16-bit word of the header. */
	ttl_word = (__u16 *)&iph->ttl;
	old_word = *ttl_word;
	iph->ttl--;
	iph->check = spine_csum_replace16(iph->check, old_word, *ttl_word);

	iph->daddr = new_daddr;
	iph->check = spine_csum_replace32(iph->check, old_daddr, new_daddr);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
