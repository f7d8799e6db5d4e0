/* Corpus: IPv4 with options (the header length from `ihl * 4`), TCP with its options
 * walked in a bounded loop to find MSS, clamped to 1400 on SYNs with the checksum updated
 * incrementally, as MSS-clamping XDP programs do. */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ip.h>
#include <linux/tcp.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

/* Built twice: loops unrolled, and (-DLOOPS) kept as bounded loops. */
#ifdef LOOPS
#define UNROLL _Pragma("nounroll")
#else
#define UNROLL _Pragma("unroll")
#endif

#define MAX_OPTS 10
#define MSS_MAX 1400

static __always_inline __u16 csum_fold(__u32 c)
{
	c = (c & 0xffff) + (c >> 16);
	c = (c & 0xffff) + (c >> 16);
	return ~c;
}

SEC("xdp")
int tcp_mss(struct xdp_md *ctx)
{
	void *data = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	struct ethhdr *eth = data;
	struct iphdr *ip;
	struct tcphdr *th;
	__u8 *opt;
	__u32 ihl, doff;

	if ((void *)(eth + 1) > end)
		return XDP_DROP;
	if (eth->h_proto != bpf_htons(ETH_P_IP))
		return XDP_PASS;
	ip = (void *)(eth + 1);
	if ((void *)(ip + 1) > end)
		return XDP_DROP;
	ihl = ip->ihl * 4;
	if (ihl < sizeof(*ip) || ip->protocol != IPPROTO_TCP)
		return XDP_PASS;
	th = (void *)ip + ihl;
	if ((void *)(th + 1) > end)
		return XDP_DROP;
	if (!th->syn)
		return XDP_PASS;
	doff = th->doff * 4;
	if (doff < sizeof(*th))
		return XDP_DROP;
	opt = (__u8 *)(th + 1);
UNROLL
	for (int i = 0; i < MAX_OPTS; i++) {
		if ((void *)(opt + 1) > end || (void *)opt >= (void *)th + doff)
			break;
		if (*opt == 0)
			break;
		if (*opt == 1) {
			opt++;
			continue;
		}
		if ((void *)(opt + 2) > end)
			break;
		if (opt[0] == 2 && opt[1] == 4) {
			__be16 *mss = (void *)(opt + 2);

			if ((void *)(mss + 1) > end)
				break;
			if (bpf_ntohs(*mss) > MSS_MAX) {
				__u32 c = (__u16)~th->check;

				c += (__u16)~*mss;
				*mss = bpf_htons(MSS_MAX);
				c += *mss;
				th->check = csum_fold(c);
				return XDP_TX;
			}
			break;
		}
		if (opt[1] < 2)
			break;
		opt += opt[1];
	}
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
