/* Meters flows in a small hash map, deleting each once exported, and sources in a per-CPU hash.
 *
 * A flow meter of the NetFlow kind. Each IPv4 or IPv6 frame is counted against its
 * 5-tuple in `flows`: a new flow is inserted with BPF_NOEXIST, a known one updated in
 * place with atomic adds, and once a flow has EXPORT_AFTER frames its record is deleted,
 * as a meter deletes a flow it has exported. The table is small on purpose: when it is
 * full, inserts fail with -E2BIG and the frame is counted as untracked, the overload a
 * real meter must survive. Per-source frame counts go to a per-CPU hash, `sources`,
 * which needs no atomics. `meter_stats` counts what happened; every frame passes.
 */
#include <linux/bpf.h>
#include <linux/errno.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/ipv6.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define TABLE_SIZE 64
#define EXPORT_AFTER 8		/* frames */
#define IP_OFFSET 0x1fff

/* Addresses and ports in network byte order; an IPv4 address fills addr[0] only. */
struct flow_key {
	__be32 saddr[4];
	__be32 daddr[4];
	__be16 sport;		/* 0 unless TCP or UDP with its header in this frame */
	__be16 dport;
	__u8 proto;
	__u8 family;		/* 4 or 6 */
	__u16 pad;		/* explicit and zeroed: every byte of a key is hashed */
};

struct flow_counters {
	__u64 frames;
	__u64 bytes;
};

enum meter_stat {
	STAT_NEW_FLOW,
	STAT_EXPORTED,
	STAT_UNTRACKED,		/* `flows` full: -E2BIG */
	STAT_INSERT_RACE,	/* another CPU inserted the flow first: -EEXIST */
	STAT_NEW_SOURCE,
	STAT_SOURCES_FULL,	/* `sources` full: -E2BIG */
	STAT_NOT_IP,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TABLE_SIZE);
	__type(key, struct flow_key);
	__type(value, struct flow_counters);
} flows SEC(".maps");

/* Source address (as in flow_key) -> frames, one counter per CPU. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_HASH);
	__uint(max_entries, TABLE_SIZE);
	__type(key, __be32[4]);
	__type(value, __u64);
} sources SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} meter_stats SEC(".maps");

static __always_inline void count(__u32 stat)
{
	__u64 *value = bpf_map_lookup_elem(&meter_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, 1);
}

/* Fills the ports if a TCP or UDP header is at the cursor; leaves them 0 otherwise. */
static __always_inline void parse_ports(struct spine_cursor *cur, struct flow_key *key)
{
	struct udphdr *ports;	/* TCP and UDP both start with the two ports */

	if (key->proto != IPPROTO_TCP && key->proto != IPPROTO_UDP)
		return;
	ports = SPINE_PULL(cur, struct udphdr);
	if (!ports)
		return;
	key->sport = ports->source;
	key->dport = ports->dest;
}

/* Returns 0 with the key filled in, or -1 if the frame is not IPv4 or IPv6. */
static __always_inline int parse_key(struct xdp_md *ctx, struct flow_key *key)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);

	if (!eth)
		return -1;
	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = SPINE_PULL(&cur, struct iphdr);

		if (!iph || iph->version != 4 || iph->ihl < 5)
			return -1;
		key->family = 4;
		key->proto = iph->protocol;
		key->saddr[0] = iph->saddr;
		key->daddr[0] = iph->daddr;
		if (!(iph->frag_off & bpf_htons(IP_OFFSET)) &&
		    spine_pull(&cur, iph->ihl * 4 - sizeof(*iph)))
			parse_ports(&cur, key);
		return 0;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IPV6)) {
		struct ipv6hdr *ip6h = SPINE_PULL(&cur, struct ipv6hdr);

		if (!ip6h || ip6h->version != 6)
			return -1;
		key->family = 6;
		/* Extension headers are not walked: their flows count under that protocol. */
		key->proto = ip6h->nexthdr;
		__builtin_memcpy(key->saddr, &ip6h->saddr, sizeof(key->saddr));
		__builtin_memcpy(key->daddr, &ip6h->daddr, sizeof(key->daddr));
		parse_ports(&cur, key);
		return 0;
	}
	return -1;
}

static __always_inline void meter_flow(const struct flow_key *key, __u64 len)
{
	struct flow_counters *counters = bpf_map_lookup_elem(&flows, key);
	long err;

	if (counters) {
		__u64 seen = __sync_fetch_and_add(&counters->frames, 1) + 1;

		__sync_fetch_and_add(&counters->bytes, len);
		if (seen == EXPORT_AFTER && bpf_map_delete_elem(&flows, key) == 0)
			count(STAT_EXPORTED);
		return;
	}

	struct flow_counters first = { .frames = 1, .bytes = len };

	err = bpf_map_update_elem(&flows, key, &first, BPF_NOEXIST);
	if (err == 0)
		count(STAT_NEW_FLOW);
	else if (err == -E2BIG)
		count(STAT_UNTRACKED);
	else if (err == -EEXIST)
		count(STAT_INSERT_RACE);
}

static __always_inline void meter_source(const __be32 *saddr)
{
	__u64 *frames = bpf_map_lookup_elem(&sources, saddr);
	__u64 one = 1;
	long err;

	if (frames) {
		*frames += 1;	/* this CPU's slot: no atomics needed */
		return;
	}
	err = bpf_map_update_elem(&sources, saddr, &one, BPF_NOEXIST);
	if (err == 0)
		count(STAT_NEW_SOURCE);
	else if (err == -E2BIG)
		count(STAT_SOURCES_FULL);
}

SEC("xdp")
int hash_map(struct xdp_md *ctx)
{
	__u64 len = ctx->data_end - ctx->data;
	struct flow_key key;

	__builtin_memset(&key, 0, sizeof(key));
	if (parse_key(ctx, &key) < 0) {
		count(STAT_NOT_IP);
		return XDP_PASS;
	}
	meter_flow(&key, len);
	meter_source(key.saddr);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
