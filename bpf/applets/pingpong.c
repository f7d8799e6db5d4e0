/* The ping-pong applet: two endpoints on two adapters bounce a frame between them with
 * no host involved after the first send. The frame is Ethernet/IPv4/UDP whose payload
 * begins with two 32-bit counters (host byte order): `hops` so far and `target`. doRx
 * adds one to `hops` and, while hops < target, swaps the Ethernet addresses and sends
 * the frame straight back out of the endpoint's port (XDP_TX); the frame that reaches
 * the target is delivered to the endpoint (XDP_PASS). bounces[0] counts the frames this
 * adapter's applet sent back, bounces[1] the frames it delivered. Frames that are not
 * IPv4/UDP with room for the counters are delivered untouched. */
#include <spine_helpers.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 2);
	__type(key, __u32);
	__type(value, __u64);
} bounces SEC(".maps");

struct pingpong {
	__u32 hops;
	__u32 target;
};

static __always_inline void bump(__u32 k)
{
	__u64 *n = bpf_map_lookup_elem(&bounces, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("spine/applet/rx")
int do_rx(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip = data + sizeof(*eth);
	struct pingpong *pp;
	__u8 mac[ETH_ALEN];

	if ((void *)(ip + 1) > end || eth->h_proto != bpf_htons(ETH_P_IP) ||
	    ip->protocol != IPPROTO_UDP || ip->ihl != 5)
		return XDP_PASS;
	pp = (void *)(ip + 1) + sizeof(struct udphdr);
	if ((void *)(pp + 1) > end)
		return XDP_PASS;
	pp->hops += 1;
	if (pp->hops >= pp->target) {
		bump(1);
		return XDP_PASS;
	}
	__builtin_memcpy(mac, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, mac, ETH_ALEN);
	bump(0);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
