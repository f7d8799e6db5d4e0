/* Corpus: a consistent-hash load balancer with an LRU connection table, in the shape of
 * production balancers: a VIP table (hash), a ring of backends (array), flows pinned in
 * an LRU hash on first sight, destination rewritten with the IPv4 checksum updated, and
 * per-CPU counters updated from several non-inlined functions. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define RING 64

struct flow {
	__be32 src, dst;
	__be16 sport, dport;
	__u8 proto;
	__u8 pad[3];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16);
	__type(key, __be32);
	__type(value, __u32);
} vips SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, RING);
	__type(key, __u32);
	__type(value, __be32);
} ring SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 1024);
	__type(key, struct flow);
	__type(value, __be32);
} conns SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 4);
	__type(key, __u32);
	__type(value, __u64);
} stats SEC(".maps");

enum { ST_NEW, ST_HIT, ST_NOT_VIP, ST_BAD };

static __attribute__((noinline)) void count(__u32 what)
{
	__u64 *n = bpf_map_lookup_elem(&stats, &what);

	if (n)
		*n += 1;
}

static __attribute__((noinline)) __u32 flow_hash(struct flow *f)
{
	__u32 h = f->src * 0x9e3779b1u;

	h ^= f->dst + 0x7f4a7c15u + (h << 6) + (h >> 2);
	h ^= ((__u32)f->sport << 16 | f->dport) + (h << 6) + (h >> 2);
	h ^= f->proto;
	return h;
}

static __always_inline __u16 csum_replace4(__u16 check, __be32 from, __be32 to)
{
	__u32 c = (__u16)~check;

	c += (__u16)~(from & 0xffff) + (__u16)~(from >> 16);
	c += (to & 0xffff) + (to >> 16);
	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	return ~c;
}

SEC("xdp")
int lb(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct flow f = {};
	struct iphdr *ip;
	__be32 *backend;
	__u32 ihl;

	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end) {
		count(ST_BAD);
		return XDP_DROP;
	}
	if (!bpf_map_lookup_elem(&vips, &ip->daddr)) {
		count(ST_NOT_VIP);
		return XDP_PASS;
	}
	ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip) || ihl > 60) {
		count(ST_BAD);
		return XDP_DROP;
	}
	f.src = ip->saddr;
	f.dst = ip->daddr;
	f.proto = ip->protocol;
	if (ip->protocol == IPPROTO_TCP || ip->protocol == IPPROTO_UDP) {
		__be16 *ports = (void *)ip + ihl;

		if ((void *)(ports + 2) > end) {
			count(ST_BAD);
			return XDP_DROP;
		}
		f.sport = ports[0];
		f.dport = ports[1];
	}
	backend = bpf_map_lookup_elem(&conns, &f);
	if (backend) {
		count(ST_HIT);
	} else {
		__u32 slot = flow_hash(&f) % RING;

		backend = bpf_map_lookup_elem(&ring, &slot);
		if (!backend || !*backend)
			return XDP_DROP;
		bpf_map_update_elem(&conns, &f, backend, BPF_ANY);
		count(ST_NEW);
	}
	ip->check = csum_replace4(ip->check, ip->daddr, *backend);
	ip->daddr = *backend;
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
