/* Swaps the source and destination MAC addresses and sends the frame back out (XDP_TX).
 *
 * The classic XDP reflector, used to measure the forwarding path without any lookup:
 * every frame goes back to where it came from, addressed to its sender. A frame too
 * short to hold an Ethernet header is dropped.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>
#include "spine_helpers.h"

SEC("xdp")
int mac_swap(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	__u8 tmp[ETH_ALEN];

	if (!eth)
		return XDP_DROP;

	__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
	__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
	__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
	return XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
