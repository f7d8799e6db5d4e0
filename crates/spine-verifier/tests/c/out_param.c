/* A header length computed by a function of its own (not inlined) and handed back
 * through a pointer into its caller's stack, as parsers with out-parameters do; the
 * caller adds it to the packet pointer, checks the result against the end and reads
 * there. The length is final only after a branch (a prune point) in the callee, and
 * the register holding it is not read again there: only the store through the
 * out-parameter keeps it, which is enough for the kernel.
 *
 * -DUNBOUNDED_LEN takes the length from a 32-bit field: the caller's pointer may then
 * lie beyond what a bounds check can prove, and the read must be refused. */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

static __attribute__((noinline)) int hdr_len(struct xdp_md *ctx, __u64 *out)
{
	__u8 *p = (void *)(long)ctx->data;
	void *end = (void *)(long)ctx->data_end;
	__u64 len;

	if ((void *)(p + 4) > end)
		return -1;
#ifdef UNBOUNDED_LEN
	len = (__u64)*(__u32 *)p * 4;
#else
	len = (__u64)p[1] * 4;
#endif
	if (p[0] == 7)
		len += 8;
	else if (p[0] == 9)
		len += 16;
	*out = len;
	return 0;
}

SEC("xdp")
int out_param(struct xdp_md *ctx)
{
	__u64 len = 0;
	void *data, *end;
	__u8 *q;

	if (hdr_len(ctx, &len) < 0)
		return XDP_DROP;
	data = (void *)(long)ctx->data;
	end = (void *)(long)ctx->data_end;
	q = data + len;
	if ((void *)(q + 1) > end)
		return XDP_DROP;
	return *q == 1 ? XDP_DROP : XDP_PASS;
}

char _license[] SEC("license") = "GPL";
