/* Tunnels IPv4 in IP-in-IP or GUE, pushing outer headers with bpf_xdp_adjust_head; XDP_TX.
 *
 * A tunnel ingress. UDP datagrams are carried in GUE (variant 0, UDP port 6080) so that
 * their outer UDP source port can carry a flow hash for ECMP, as FOU/GUE tunnels do;
 * every other IPv4 datagram is carried IP-in-IP (protocol 4). The outer header copies
 * DSCP and ECN from the inner one, always has DF set (so its ID need not be unique,
 * RFC 6864) and gets its checksum from bpf_csum_diff() over the new header. The frame is
 * sent back to the router it came from, with the MAC addresses swapped.
 *
 * GUE frames also carry 8 bytes of metadata in front of the frame (bpf_xdp_adjust_meta)
 * for the next stage, e.g. an AF_XDP consumer: the flow hash and the inner length.
 * Frames that are not IPv4 pass; malformed IPv4 is dropped. `encap_stats` counts each
 * outcome.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define TUNNEL_LOCAL 0xc0000201	/* 192.0.2.1 (TEST-NET-1): this end */
#define TUNNEL_REMOTE 0xc0000202	/* 192.0.2.2: the far end */
#define GUE_PORT 6080		/* IANA "gue" */
#define OUTER_TTL 64
#define IP_DF 0x4000

/* GUE variant 0 header with no extension fields (draft-ietf-intarea-gue). */
struct guehdr {
	__u8 hlen_flags;	/* version 0, C = 0, Hlen = 0 */
	__u8 proto_ctype;	/* inner protocol */
	__be16 flags;
};

enum encap_kind {
	ENCAP_IPIP = 1,
	ENCAP_GUE = 2,
};

enum encap_stat {
	STAT_IPIP,
	STAT_GUE,
	STAT_NO_META,		/* GUE frame sent without its metadata */
	STAT_NOT_IPV4,
	STAT_MALFORMED,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} encap_stats SEC(".maps");

/* What a GUE frame carries in its metadata area, in host byte order. */
struct encap_meta {
	__u32 flow_hash;
	__u16 inner_len;
	__u8 kind;		/* enum encap_kind */
	__u8 reserved;
};

static __always_inline __u32 rol32(__u32 word, unsigned int shift)
{
	return (word << shift) | (word >> (32 - shift));
}

/* Bob Jenkins' lookup3 final mix over the inner addresses and protocol: fragments of one
 * datagram hash alike, which a hash over ports would not give. */
static __always_inline __u32 flow_hash(__u32 a, __u32 b, __u32 c)
{
	c ^= b; c -= rol32(b, 14);
	a ^= c; a -= rol32(c, 11);
	b ^= a; b -= rol32(a, 25);
	c ^= b; c -= rol32(b, 16);
	a ^= c; a -= rol32(c, 4);
	b ^= a; b -= rol32(a, 14);
	c ^= b; c -= rol32(b, 24);
	return c;
}

static __always_inline void count(__u32 stat)
{
	__u64 *value = bpf_map_lookup_elem(&encap_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, 1);
}

static __always_inline int malformed(void)
{
	count(STAT_MALFORMED);
	return XDP_DROP;
}

SEC("xdp")
int encap(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	struct ethhdr outer_eth;
	struct iphdr *inner, *outer;
	__u32 hdr_len, tot_len, encap_len, hash;
	__u8 kind, tos;
	__s64 sum;

	if (!eth)
		return malformed();
	if (eth->h_proto != bpf_htons(ETH_P_IP)) {
		count(STAT_NOT_IPV4);
		return XDP_PASS;
	}

	inner = SPINE_PULL(&cur, struct iphdr);
	if (!inner)
		return malformed();
	hdr_len = inner->ihl * 4;
	tot_len = bpf_ntohs(inner->tot_len);
	if (inner->version != 4 || hdr_len < sizeof(*inner) || tot_len < hdr_len ||
	    tot_len > spine_remaining(&cur) + sizeof(*inner))
		return malformed();

	kind = inner->protocol == IPPROTO_UDP ? ENCAP_GUE : ENCAP_IPIP;
	encap_len = sizeof(struct iphdr);
	if (kind == ENCAP_GUE)
		encap_len += sizeof(struct udphdr) + sizeof(struct guehdr);
	if (tot_len + encap_len > 0xffff)
		return malformed();

	/* Everything needed from the old headers, before adjust_head invalidates them. */
	hash = flow_hash(inner->saddr, inner->daddr, inner->protocol);
	tos = inner->tos;
	__builtin_memcpy(outer_eth.h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(outer_eth.h_source, eth->h_dest, ETH_ALEN);
	outer_eth.h_proto = bpf_htons(ETH_P_IP);

	if (bpf_xdp_adjust_head(ctx, -(int)encap_len))
		return XDP_DROP;

	if (kind == ENCAP_GUE) {
		struct encap_meta *meta;
		void *data;

		/* Failing to attach metadata is not a reason to lose the frame. */
		if (bpf_xdp_adjust_meta(ctx, -(int)sizeof(*meta)) == 0) {
			meta = (void *)(long)ctx->data_meta;
			data = (void *)(long)ctx->data;
			if ((void *)(meta + 1) <= data) {
				meta->flow_hash = hash;
				meta->inner_len = tot_len;
				meta->kind = kind;
				meta->reserved = 0;
			}
		} else {
			count(STAT_NO_META);
		}
	}

	cur = spine_cursor_init(ctx);
	eth = SPINE_PULL(&cur, struct ethhdr);
	outer = SPINE_PULL(&cur, struct iphdr);
	if (!eth || !outer)
		return XDP_ABORTED;
	__builtin_memcpy(eth, &outer_eth, sizeof(outer_eth));

	outer->version = 4;
	outer->ihl = sizeof(*outer) / 4;
	outer->tos = tos;
	outer->tot_len = bpf_htons(tot_len + encap_len);
	outer->id = 0;
	outer->frag_off = bpf_htons(IP_DF);
	outer->ttl = OUTER_TTL;
	outer->protocol = kind == ENCAP_GUE ? IPPROTO_UDP : IPPROTO_IPIP;
	outer->check = 0;
	outer->saddr = bpf_htonl(TUNNEL_LOCAL);
	outer->daddr = bpf_htonl(TUNNEL_REMOTE);
	sum = bpf_csum_diff(NULL, 0, (__be32 *)outer, sizeof(*outer), 0);
	if (sum < 0)
		return XDP_ABORTED;
	outer->check = spine_csum_fold(sum);

	if (kind == ENCAP_GUE) {
		struct udphdr *uh = SPINE_PULL(&cur, struct udphdr);
		struct guehdr *gh = SPINE_PULL(&cur, struct guehdr);

		if (!uh || !gh)
			return XDP_ABORTED;
		/* A source port from the flow hash, in the dynamic range 49152-65535
		 * (RFC 6335), for ECMP on the way to the far end. */
		uh->source = bpf_htons(0xc000 | (hash & 0x3fff));
		uh->dest = bpf_htons(GUE_PORT);
		uh->len = bpf_htons(tot_len + sizeof(*uh) + sizeof(*gh));
		uh->check = 0;	/* optional over IPv4 (RFC 768) */
		gh->hlen_flags = 0;
		gh->proto_ctype = IPPROTO_IPIP;
		gh->flags = 0;
	}
	count(kind == ENCAP_GUE ? STAT_GUE : STAT_IPIP);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
