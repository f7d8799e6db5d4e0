/* A small IPv4 ACL built from bpf-to-bpf calls: parse, match rules, hash; the callees decide.
 *
 * Written as larger programs are, in separate functions that the compiler must not
 * inline (`static __noinline`): each is a BPF subprogram with its own stack frame, and
 * the flow they share lives in the entry program's frame and is passed down by pointer.
 *
 *   calls ─┬─ parse_flow ── parse_ports                   fill the caller's struct flow
 *          ├─ acl_lookup ── rule_matches                  rule table in .rodata
 *          └─ flow_bucket ── flow_hash ── hash_words ── mix
 *                            (a direction-independent key on flow_hash's own stack)
 *
 * The first matching rule decides (XDP_DROP or XDP_PASS; no match passes). Each verdict
 * is counted per rule in `rule_hits`, and each flow's hash bucket in `flow_buckets`, the
 * histogram one looks at before sizing an RSS indirection table. Frames that are not
 * IPv4 pass uncounted; truncated or malformed IPv4 is dropped.
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

#define IP_OFFSET 0x1fff
#define ACL_RULES 6
#define FLOW_BUCKETS 16

enum parse_result {
	PARSE_MALFORMED = -1,
	PARSE_NOT_IPV4 = 0,
	PARSE_OK = 1,
};

/* Host byte order throughout; ports are 0 for protocols without them and fragments. */
struct flow {
	__u32 saddr;
	__u32 daddr;
	__u16 sport;
	__u16 dport;
	__u8 proto;
	__u8 pad[3];
};

struct acl_rule {
	__u8 proto;
	__u8 verdict;		/* XDP_DROP or XDP_PASS */
	__u16 port_lo;		/* destination port range, inclusive */
	__u16 port_hi;
};

/* First match wins; .rodata, so the verifier knows the table cannot change. */
static const struct acl_rule acl[ACL_RULES] = {
	{ IPPROTO_TCP, XDP_DROP, 23, 23 },	/* telnet */
	{ IPPROTO_TCP, XDP_DROP, 135, 139 },	/* MS RPC, NetBIOS session */
	{ IPPROTO_UDP, XDP_DROP, 137, 138 },	/* NetBIOS name and datagram */
	{ IPPROTO_TCP, XDP_DROP, 445, 445 },	/* SMB */
	{ IPPROTO_UDP, XDP_PASS, 53, 53 },	/* DNS, before the catch-all below */
	{ IPPROTO_UDP, XDP_DROP, 0, 1023 },	/* other well-known UDP services */
};

/* Index ACL_RULES counts frames that matched no rule. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, ACL_RULES + 1);
	__type(key, __u32);
	__type(value, __u64);
} rule_hits SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, FLOW_BUCKETS);
	__type(key, __u32);
	__type(value, __u64);
} flow_buckets SEC(".maps");

static __noinline int parse_ports(void *l4, void *data_end, struct flow *flow)
{
	/* TCP and UDP both start with the source and destination port. */
	struct udphdr *ports = l4;

	if ((void *)(ports + 1) > data_end)
		return PARSE_MALFORMED;
	flow->sport = bpf_ntohs(ports->source);
	flow->dport = bpf_ntohs(ports->dest);
	return PARSE_OK;
}

static __noinline int parse_flow(struct xdp_md *ctx, struct flow *flow)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	struct iphdr *iph;
	__u32 hdr_len;

	if (!eth)
		return PARSE_MALFORMED;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return PARSE_NOT_IPV4;
	iph = SPINE_PULL(&cur, struct iphdr);
	if (!iph)
		return PARSE_MALFORMED;
	hdr_len = iph->ihl * 4;
	if (iph->version != 4 || hdr_len < sizeof(*iph) || !spine_pull(&cur, hdr_len - sizeof(*iph)))
		return PARSE_MALFORMED;

	flow->saddr = bpf_ntohl(iph->saddr);
	flow->daddr = bpf_ntohl(iph->daddr);
	flow->proto = iph->protocol;
	if ((iph->protocol == IPPROTO_TCP || iph->protocol == IPPROTO_UDP) &&
	    !(iph->frag_off & bpf_htons(IP_OFFSET)))
		return parse_ports(cur.pos, cur.end, flow);
	return PARSE_OK;
}

static __noinline int rule_matches(const struct acl_rule *rule, const struct flow *flow)
{
	return rule->proto == flow->proto && flow->dport >= rule->port_lo &&
	       flow->dport <= rule->port_hi;
}

/* Returns the verdict of the first matching rule and stores its index in *rule_idx
 * (ACL_RULES and XDP_PASS if none matches). */
static __noinline int acl_lookup(const struct flow *flow, __u32 *rule_idx)
{
	for (__u32 i = 0; i < ACL_RULES; i++) {
		if (rule_matches(&acl[i], flow)) {
			*rule_idx = i;
			return acl[i].verdict;
		}
	}
	*rule_idx = ACL_RULES;
	return XDP_PASS;
}

/* One round of MurmurHash3's 32-bit mixing. */
static __noinline __u32 mix(__u32 hash, __u32 word)
{
	word *= 0xcc9e2d51;
	word = (word << 15) | (word >> 17);
	word *= 0x1b873593;
	hash ^= word;
	hash = (hash << 13) | (hash >> 19);
	return hash * 5 + 0xe6546b64;
}

static __noinline __u32 hash_words(const __u32 *words, __u32 n)
{
	__u32 hash = 0x5370696e;	/* "Spin" */

	for (__u32 i = 0; i < n && i < 8; i++)
		hash = mix(hash, words[i]);
	/* MurmurHash3's finaliser, so that every input bit reaches the low bits. */
	hash ^= hash >> 16;
	hash *= 0x85ebca6b;
	hash ^= hash >> 13;
	hash *= 0xc2b2ae35;
	return hash ^ (hash >> 16);
}

/* Hashes the flow with its endpoints in a fixed order, so that both directions of a
 * connection land in the same bucket. */
static __noinline __u32 flow_hash(const struct flow *flow)
{
	struct flow key = {};

	key.proto = flow->proto;
	if (flow->saddr < flow->daddr ||
	    (flow->saddr == flow->daddr && flow->sport <= flow->dport)) {
		key.saddr = flow->saddr;
		key.daddr = flow->daddr;
		key.sport = flow->sport;
		key.dport = flow->dport;
	} else {
		key.saddr = flow->daddr;
		key.daddr = flow->saddr;
		key.sport = flow->dport;
		key.dport = flow->sport;
	}
	return hash_words((const __u32 *)&key, sizeof(key) / sizeof(__u32));
}

static __noinline __u32 flow_bucket(const struct flow *flow)
{
	return flow_hash(flow) % FLOW_BUCKETS;
}

static __always_inline void count(void *map, __u32 key)
{
	__u64 *value = bpf_map_lookup_elem(map, &key);

	if (value)
		__sync_fetch_and_add(value, 1);
}

SEC("xdp")
int calls(struct xdp_md *ctx)
{
	struct flow flow = {};
	__u32 rule_idx;
	int parsed, verdict;

	parsed = parse_flow(ctx, &flow);
	if (parsed == PARSE_MALFORMED)
		return XDP_DROP;
	if (parsed == PARSE_NOT_IPV4)
		return XDP_PASS;

	verdict = acl_lookup(&flow, &rule_idx);
	count(&rule_hits, rule_idx);
	count(&flow_buckets, flow_bucket(&flow));
	return verdict;
}

char LICENSE[] SEC("license") = "GPL";
