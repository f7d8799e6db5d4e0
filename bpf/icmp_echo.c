/* Answers ICMP and ICMPv6 echo requests in place (XDP_TX), updating checksums with bpf_csum_diff.
 *
 * A ping responder that never wakes the host. An echo request to a unicast address is
 * turned into its reply where it lies: MAC and IP addresses swapped, TTL or hop limit
 * reset, type changed to echo reply. Swapping the addresses leaves every checksum as it
 * was (a one's-complement sum does not care about order); the type change is folded
 * into the ICMP checksum with bpf_csum_diff(), seeded with the old checksum, over the
 * first four bytes of the ICMP header; the TTL change into the IPv4 header checksum with
 * RFC 1624. Requests to multicast or broadcast addresses, fragments, and everything
 * else pass to the host, which knows which source address to answer from.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/icmpv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define ICMP_ECHOREPLY 0
#define ICMP_ECHO 8
#define REPLY_TTL 64
#define ECHO_HDR_LEN 8		/* type, code, checksum, identifier, sequence */
#define IP_MF 0x2000
#define IP_OFFSET 0x1fff

/* The part of an ICMP or ICMPv6 header the two share (<linux/icmp.h> includes libc's
 * <sys/socket.h>, which has no BPF target). */
struct icmp_common {
	__u8 type;
	__u8 code;
	__sum16 checksum;
};

enum echo_stat {
	STAT_ECHO4,
	STAT_ECHO6,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} echo_stats SEC(".maps");

static __always_inline void count(__u32 stat)
{
	__u64 *value = bpf_map_lookup_elem(&echo_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, 1);
}

/* Rewrites the type of an echo request into `reply_type` and fixes its checksum. */
static __always_inline int make_reply(struct icmp_common *icmp, __u8 reply_type)
{
	struct icmp_common old = *icmp;
	__u16 seed = ~old.checksum;
	__s64 sum;

	/* Both sides of the difference with the checksum field itself zeroed. */
	old.checksum = 0;
	icmp->type = reply_type;
	icmp->checksum = 0;
	sum = bpf_csum_diff((__be32 *)&old, sizeof(old), (__be32 *)icmp, sizeof(*icmp), seed);
	if (sum < 0)
		return -1;
	icmp->checksum = spine_csum_fold(sum);
	return 0;
}

static __always_inline void swap_macs(struct ethhdr *eth)
{
	__u8 tmp[ETH_ALEN];

	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
}

static __always_inline int echo4(struct spine_cursor *cur, struct ethhdr *eth)
{
	struct iphdr *iph = SPINE_PULL(cur, struct iphdr);
	struct icmp_common *icmp;
	__u32 hdr_len, tot_len, daddr;
	__u16 *ttl_word, old_word;
	__be32 tmp;

	if (!iph)
		return XDP_PASS;
	hdr_len = iph->ihl * 4;
	daddr = bpf_ntohl(iph->daddr);
	if (iph->version != 4 || hdr_len < sizeof(*iph) || iph->protocol != IPPROTO_ICMP ||
	    (iph->frag_off & bpf_htons(IP_MF | IP_OFFSET)) ||
	    (daddr >> 28) == 0xe || daddr == 0xffffffff)	/* multicast, broadcast */
		return XDP_PASS;
	if (!spine_pull(cur, hdr_len - sizeof(*iph)))
		return XDP_PASS;
	tot_len = bpf_ntohs(iph->tot_len);
	if (tot_len < hdr_len + ECHO_HDR_LEN || tot_len - hdr_len > spine_remaining(cur))
		return XDP_PASS;
	icmp = SPINE_PULL(cur, struct icmp_common);
	if (!icmp || icmp->type != ICMP_ECHO || icmp->code != 0)
		return XDP_PASS;

	if (make_reply(icmp, ICMP_ECHOREPLY))
		return XDP_ABORTED;
	tmp = iph->saddr;
	iph->saddr = iph->daddr;
	iph->daddr = tmp;
	ttl_word = (__u16 *)&iph->ttl;	/* TTL shares a checksummed word with protocol */
	old_word = *ttl_word;
	iph->ttl = REPLY_TTL;
	iph->check = spine_csum_replace16(iph->check, old_word, *ttl_word);
	swap_macs(eth);
	count(STAT_ECHO4);
	return XDP_TX;
}

static __always_inline int echo6(struct spine_cursor *cur, struct ethhdr *eth)
{
	struct ipv6hdr *ip6h = SPINE_PULL(cur, struct ipv6hdr);
	struct icmp_common *icmp;
	struct in6_addr tmp;
	__u32 payload_len;

	/* Only ICMPv6 right after the fixed header; ff00::/8 is multicast. */
	if (!ip6h || ip6h->version != 6 || ip6h->nexthdr != IPPROTO_ICMPV6 ||
	    ip6h->daddr.s6_addr[0] == 0xff)
		return XDP_PASS;
	payload_len = bpf_ntohs(ip6h->payload_len);
	if (payload_len < ECHO_HDR_LEN || payload_len > spine_remaining(cur))
		return XDP_PASS;
	icmp = SPINE_PULL(cur, struct icmp_common);
	if (!icmp || icmp->type != ICMPV6_ECHO_REQUEST || icmp->code != 0)
		return XDP_PASS;

	if (make_reply(icmp, ICMPV6_ECHO_REPLY))
		return XDP_ABORTED;
	tmp = ip6h->saddr;
	ip6h->saddr = ip6h->daddr;
	ip6h->daddr = tmp;
	ip6h->hop_limit = REPLY_TTL;	/* not covered by any checksum */
	swap_macs(eth);
	count(STAT_ECHO6);
	return XDP_TX;
}

SEC("xdp")
int icmp_echo(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);

	if (!eth)
		return XDP_DROP;
	if (eth->h_proto == bpf_htons(ETH_P_IP))
		return echo4(&cur, eth);
	if (eth->h_proto == bpf_htons(ETH_P_IPV6))
		return echo6(&cur, eth);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
