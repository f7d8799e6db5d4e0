/* Counts packets and bytes per frame-length class, in a shared and in a per-CPU array.
 *
 * The simplest useful extension: every frame is classified by its length into one of a
 * few buckets (as `ethtool -S` reports rx_64_bytes, rx_65_to_127_bytes, ...) and counted
 * twice: in an array map shared by all CPUs, updated with atomic adds, and in a per-CPU
 * array, which needs no atomics because each CPU owns its slot. User space sums the
 * per-CPU slots when it reads them. Every frame is passed on unchanged.
 */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

/* Length classes, by frame length without the FCS. */
enum len_class {
	LEN_UPTO_64,	/* runts and minimum-size frames */
	LEN_UPTO_127,
	LEN_UPTO_255,
	LEN_UPTO_511,
	LEN_UPTO_1023,
	LEN_UPTO_1518,	/* up to the classic Ethernet maximum with one VLAN tag */
	LEN_JUMBO,
	LEN_CLASSES,
};

struct len_stats {
	__u64 packets;
	__u64 bytes;
};

/* Shared by all CPUs: updated with atomic adds. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, LEN_CLASSES);
	__type(key, __u32);
	__type(value, struct len_stats);
} len_stats SEC(".maps");

/* One slot per CPU: plain adds, summed by the reader. */
struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, LEN_CLASSES);
	__type(key, __u32);
	__type(value, struct len_stats);
} len_stats_percpu SEC(".maps");

static __always_inline __u32 classify(__u64 len)
{
	if (len <= 64)
		return LEN_UPTO_64;
	if (len <= 127)
		return LEN_UPTO_127;
	if (len <= 255)
		return LEN_UPTO_255;
	if (len <= 511)
		return LEN_UPTO_511;
	if (len <= 1023)
		return LEN_UPTO_1023;
	if (len <= 1518)
		return LEN_UPTO_1518;
	return LEN_JUMBO;
}

SEC("xdp")
int counter(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	__u64 len = data_end - data;
	__u32 key = classify(len);
	struct len_stats *shared, *mine;

	shared = bpf_map_lookup_elem(&len_stats, &key);
	if (shared) {
		__sync_fetch_and_add(&shared->packets, 1);
		__sync_fetch_and_add(&shared->bytes, len);
	}

	mine = bpf_map_lookup_elem(&len_stats_percpu, &key);
	if (mine) {
		mine->packets++;
		mine->bytes += len;
	}

	return XDP_PASS;
}

char LICENSE[] SEC("license") = "GPL";
