/* A frame policer configured in .rodata, with its state in .data and its statistics in .bss.
 *
 * Global variables as libbpf lays them out, each section an array map of one entry:
 *   .rodata  the `const volatile` configuration a loader may set before loading (as a
 *            libbpf skeleton's rodata), and the magic string that marks a probe frame;
 *   .data    the policer's state, initialised to a full bucket;
 *   .bss     the statistics, zero at load.
 *
 * Policy, in order: frames longer than max_frame_len are dropped; UDP frames whose payload
 * starts with the probe magic are reflected at layer 2 (MACs swapped, XDP_TX), like a
 * loopback test; every other frame spends a credit of a token bucket, or is dropped when
 * none is left. The bucket holds up to `burst` credits and gets `refill_credits` more
 * every `refill_every` frames: a frame count rather than a clock, so the policer is
 * deterministic. The state is shared by all CPUs without a lock; a policer tolerates the
 * odd miscount that racing CPUs can cause.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/udp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>
#include "spine_helpers.h"

#define PROBE_MAGIC_LEN 11

/* .rodata: configuration. */
const volatile __u32 max_frame_len = 1514;
const volatile __u32 burst = 32;
const volatile __u32 refill_every = 4;
const volatile __u32 refill_credits = 3;
const char probe_magic[PROBE_MAGIC_LEN + 1] = "spine-probe";

/* .data: policer state. */
__u32 credits = 32;
__u32 frames_to_refill = 4;

/* .bss: statistics. */
struct stats {
	__u64 frames;
	__u64 passed;
	__u64 oversize;
	__u64 policed;
	__u64 probes;
} stats;

static __always_inline int is_probe(struct spine_cursor *cur)
{
	struct iphdr *iph = SPINE_PULL(cur, struct iphdr);
	__u8 *payload;

	if (!iph || iph->version != 4 || iph->ihl < 5 || iph->protocol != IPPROTO_UDP)
		return 0;
	if (!spine_pull(cur, iph->ihl * 4 - sizeof(*iph)) || !SPINE_PULL(cur, struct udphdr))
		return 0;
	payload = spine_pull(cur, PROBE_MAGIC_LEN);
	if (!payload)
		return 0;
	/* Byte by byte from .rodata, not unrolled into immediates. */
#pragma clang loop unroll(disable)
	for (int i = 0; i < PROBE_MAGIC_LEN; i++)
		if (payload[i] != probe_magic[i])
			return 0;
	return 1;
}

/* Spends one credit; refills the bucket every `refill_every` frames first. */
static __always_inline int take_credit(void)
{
	if (frames_to_refill <= 1) {
		__u32 refilled = credits + refill_credits;

		credits = refilled < burst ? refilled : burst;
		frames_to_refill = refill_every;
	} else {
		frames_to_refill--;
	}
	if (credits == 0)
		return 0;
	credits--;
	return 1;
}

SEC("xdp")
int global_data(struct xdp_md *ctx)
{
	struct spine_cursor cur = spine_cursor_init(ctx);
	struct ethhdr *eth = SPINE_PULL(&cur, struct ethhdr);
	__u8 tmp[ETH_ALEN];

	__sync_fetch_and_add(&stats.frames, 1);
	if (!eth)
		return XDP_DROP;
	if (cur.end - (void *)eth > max_frame_len) {
		__sync_fetch_and_add(&stats.oversize, 1);
		return XDP_DROP;
	}
	if (eth->h_proto == bpf_htons(ETH_P_IP) && is_probe(&cur)) {
		__sync_fetch_and_add(&stats.probes, 1);
		__builtin_memcpy(tmp, eth->h_dest, ETH_ALEN);
		__builtin_memcpy(eth->h_dest, eth->h_source, ETH_ALEN);
		__builtin_memcpy(eth->h_source, tmp, ETH_ALEN);
		return XDP_TX;
	}
	if (!take_credit()) {
		__sync_fetch_and_add(&stats.policed, 1);
		return XDP_DROP;
	}
	__sync_fetch_and_add(&stats.passed, 1);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
