/* Pushes the access VLAN tag onto untagged frames and pops the outer tag (bpf_xdp_adjust_head).
 *
 * The edge of a VLAN, as a switch's access port does it. Untagged frames get an 802.1Q
 * tag with the port's VLAN id and go out towards the trunk (XDP_TX); the tag's priority
 * (PCP) is the IPv4 precedence, so that QoS marking survives the trip. Tagged frames,
 * 802.1Q or 802.1ad, lose their outer tag and go up to the host (XDP_PASS); in a QinQ
 * frame the inner tag stays. A push moves the frame start 4 bytes earlier, a pop 4 bytes
 * later, and the MAC addresses move with it; the EtherType after the MACs is already in
 * place either way.
 *
 * The VLAN id comes from `vlan_config`, set by the control plane; 0 means unset and
 * DEFAULT_VID is used. A frame too short for the tag it claims is dropped.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define DEFAULT_VID 100
#define VLAN_VID_MASK 0x0fff
#define VLAN_PCP_SHIFT 13

/* An Ethernet header with one tag (the kernel's struct vlan_ethhdr is not UAPI). */
struct vlan_ethhdr {
	__u8 h_dest[ETH_ALEN];
	__u8 h_source[ETH_ALEN];
	__be16 h_vlan_proto;
	__be16 h_vlan_TCI;
	__be16 h_vlan_encapsulated_proto;
};

#define VLAN_HLEN 4

enum vlan_stat {
	STAT_PUSHED,
	STAT_POPPED,
	STAT_TRUNCATED,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u32);	/* the access VLAN id; 0: DEFAULT_VID */
} vlan_config SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} vlan_stats SEC(".maps");

static __always_inline void count(__u32 stat)
{
	__u64 *value = bpf_map_lookup_elem(&vlan_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, 1);
}

static __always_inline __u16 access_vid(void)
{
	__u32 key = 0;
	__u32 *vid = bpf_map_lookup_elem(&vlan_config, &key);

	if (vid && (*vid & VLAN_VID_MASK))
		return *vid & VLAN_VID_MASK;
	return DEFAULT_VID;
}

static __always_inline int pop_tag(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct vlan_ethhdr *veth = SPINE_PULL(&cur, struct vlan_ethhdr);
	__u8 macs[2 * ETH_ALEN];
	struct ethhdr *eth;

	if (!veth) {
		count(STAT_TRUNCATED);
		return XDP_DROP;
	}
	__builtin_memcpy(macs, veth, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, VLAN_HLEN))
		return XDP_DROP;

	cur = spine_cursor_init(ctx);
	eth = SPINE_PULL(&cur, struct ethhdr);
	if (!eth)
		return XDP_ABORTED;
	__builtin_memcpy(eth, macs, sizeof(macs));
	count(STAT_POPPED);
	return XDP_PASS;
}

static __always_inline int push_tag(struct xdp_md *ctx, const struct ethhdr *eth)
{
	__u8 macs[2 * ETH_ALEN];
	struct vlan_ethhdr *veth;
	struct spine_cursor cur;
	__u16 pcp = 0;

	if (eth->h_proto == bpf_htons(ETH_P_IP)) {
		struct iphdr *iph = (void *)(eth + 1);

		if ((void *)(iph + 1) <= (void *)(long)ctx->data_end)
			pcp = iph->tos >> 5;	/* IP precedence */
	}
	__builtin_memcpy(macs, eth, sizeof(macs));
	if (bpf_xdp_adjust_head(ctx, -VLAN_HLEN))
		return XDP_DROP;

	cur = spine_cursor_init(ctx);
	veth = SPINE_PULL(&cur, struct vlan_ethhdr);
	if (!veth)
		return XDP_ABORTED;
	__builtin_memcpy(veth, macs, sizeof(macs));
	veth->h_vlan_proto = bpf_htons(ETH_P_8021Q);
	veth->h_vlan_TCI = bpf_htons((pcp << VLAN_PCP_SHIFT) | access_vid());
	count(STAT_PUSHED);
	return XDP_TX;
}

SEC("xdp")
int vlan(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);

	if (!eth)
		return XDP_DROP;
	if (spine_eth_is_vlan(eth->h_proto))
		return pop_tag(ctx);
	return push_tag(ctx, eth);
}

char LICENSE[] SEC("license") = "GPL";
