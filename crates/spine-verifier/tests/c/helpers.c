/* Helpers with memory arguments, a bpf_loop callback, global data and a bpf-to-bpf
 * call that fills its caller's struct. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/ip.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 128);
	__type(key, __u32);
	__type(value, __u64);
} by_saddr SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, 8);
	__type(key, __u32);
	__type(value, __u32);
} tx_port SEC(".maps");

volatile __u64 seen;			/* .bss */
const volatile __u32 out_port = 3;	/* .rodata */

struct acc {
	__u64 total;
	__u32 n;
};

static int add_one(__u32 index, void *data)
{
	struct acc *a = data;

	a->total += index;
	a->n++;
	return a->n >= 10;
}

static __attribute__((noinline)) int read_saddr(struct xdp_md *ctx, __u32 *saddr)
{
	void *data = (void *)(long)ctx->data;
	void *data_end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *iph = data + sizeof(*eth);

	if ((void *)(iph + 1) > data_end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return -1;
	*saddr = iph->saddr;
	return 0;
}

SEC("xdp")
int helpers(struct xdp_md *ctx)
{
	struct acc a = {};
	__u32 saddr = 0;
	__u64 one = 1, *v;
	__u32 csum_buf[2] = { 1, 2 };

	bpf_loop(100, add_one, &a, 0);
	seen += a.total;
	if (read_saddr(ctx, &saddr))
		return XDP_PASS;
	v = bpf_map_lookup_elem(&by_saddr, &saddr);
	if (v)
		__sync_fetch_and_add(v, 1);
	else
		bpf_map_update_elem(&by_saddr, &saddr, &one, BPF_NOEXIST);
	if (bpf_csum_diff(0, 0, csum_buf, sizeof(csum_buf), 0) == 7)
		return XDP_DROP;
	return bpf_redirect_map(&tx_port, out_port, XDP_PASS);
}

char LICENSE[] SEC("license") = "GPL";
