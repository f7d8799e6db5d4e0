/* Cuts long frames to a snap length and pads runts to the Ethernet minimum (bpf_xdp_adjust_tail).
 *
 * The front end of a mirror-port sampler. Frames longer than SNAP_LEN keep only their
 * first SNAP_LEN bytes, enough for the headers a flow collector reads, and are sent
 * back out to the collector (XDP_TX); the IP lengths inside still tell the original
 * size, as a pcap record's caplen and len do. Frames shorter than the 60-byte Ethernet
 * minimum (without FCS) are padded up to it and passed on: the pad bytes are PAD_BYTE
 * rather than zeros, so that padding added here is easy to tell apart in a capture.
 * Everything else passes unchanged. `trim_stats` counts frames and bytes cut and added.
 */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <bpf/bpf_helpers.h>

#define SNAP_LEN 128
#define MIN_FRAME_LEN ETH_ZLEN	/* 60 */
#define PAD_BYTE 0xa5

enum trim_stat {
	STAT_SNAPPED,		/* frames cut to SNAP_LEN */
	STAT_BYTES_CUT,
	STAT_PADDED,		/* runts padded to MIN_FRAME_LEN */
	STAT_BYTES_PADDED,
	STAT_UNCHANGED,
	STAT_MAX,
};

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, STAT_MAX);
	__type(key, __u32);
	__type(value, __u64);
} trim_stats SEC(".maps");

static __always_inline void count(__u32 stat, __u64 n)
{
	__u64 *value = bpf_map_lookup_elem(&trim_stats, &stat);

	if (value)
		__sync_fetch_and_add(value, n);
}

SEC("xdp")
int trim(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	__u8 *pad;

	if (len > SNAP_LEN) {
		if (bpf_xdp_adjust_tail(ctx, (int)(SNAP_LEN - len)))
			return XDP_ABORTED;
		count(STAT_SNAPPED, 1);
		count(STAT_BYTES_CUT, len - SNAP_LEN);
		return XDP_TX;
	}
	if (len >= MIN_FRAME_LEN) {
		count(STAT_UNCHANGED, 1);
		return XDP_PASS;
	}

	if (bpf_xdp_adjust_tail(ctx, (int)(MIN_FRAME_LEN - len)))
		return XDP_ABORTED;
	/* adjust_tail invalidated every packet pointer: start again from ctx. */
	data = (void *)(long)ctx->data;
	data_end = (void *)(long)ctx->data_end;
	pad = data + len;
	for (int i = 0; i < MIN_FRAME_LEN; i++) {
		if ((void *)(pad + 1) > data_end)
			break;
		/* volatile: keeps clang from turning the loop into a memset() call, which
		 * BPF has no instruction for. */
		*(volatile __u8 *)pad = PAD_BYTE;
		pad++;
	}
	count(STAT_PADDED, 1);
	count(STAT_BYTES_PADDED, MIN_FRAME_LEN - len);
	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
