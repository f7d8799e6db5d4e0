/* Corpus: a VLAN stack (802.1ad service tag over an 802.1Q customer tag, or one tag)
 * parsed and the outer tag popped with bpf_xdp_adjust_head, the MAC addresses moved in
 * front, as edge routers' XDP programs do; untagged frames pass. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Built twice: loops unrolled, and (-DLOOPS) kept as bounded loops. */
#ifdef LOOPS
#define UNROLL _Pragma("nounroll")
#else
#define UNROLL _Pragma("unroll")
#endif

struct vlan_hdr {
	__be16 tci;
	__be16 proto;
};

static __always_inline int is_vlan(__be16 p)
{
	return p == bpf_htons(ETH_P_8021Q) || p == bpf_htons(ETH_P_8021AD);
}

SEC("xdp")
int vlan_pop(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct vlan_hdr *v;
	__u8 macs[12];
	int depth = 0;
	__be16 proto;

	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	proto = eth->h_proto;
	v = (void *)(eth + 1);
UNROLL
	for (int i = 0; i < 2; i++) {
		if (!is_vlan(proto))
			break;
		if ((void *)(v + 1) > end)
			return XDP_DROP;
		proto = v->proto;
		v++;
		depth++;
	}
	if (depth == 0)
		return XDP_PASS;
	if (is_vlan(proto))
		return XDP_DROP;
	__builtin_memcpy(macs, eth, 12);
	if (bpf_xdp_adjust_head(ctx, sizeof(struct vlan_hdr)))
		return XDP_ABORTED;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	if (data + 12 > end)
		return XDP_ABORTED;
	__builtin_memcpy(data, macs, 12);
	return XDP_TX;
}

char _license[] SEC("license") = "GPL";
