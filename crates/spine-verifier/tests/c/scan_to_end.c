/* A cursor moved one byte at a time until it meets the packet's end, then the last byte
 * read through it: the verifier must keep the cursor's exact offset through up to 1,440
 * passes of a short loop (the kernel explores each pass; joining them loses the bound
 * the pointer arithmetic needs). */
#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

#ifndef SCAN_MAX
#define SCAN_MAX 1440
#endif

SEC("xdp")
int scan_to_end(struct xdp_md *ctx)
{
	void *data_end = (void *)(long)ctx->data_end;
	void *data = (void *)(long)ctx->data;
	unsigned int off = 60, i;
	unsigned char *last;

	for (i = 0; i < SCAN_MAX; i++) {
		if (data + off > data_end)
			return XDP_PASS;
		if (data + off == data_end)
			goto found;
		off++;
	}
	return XDP_PASS;
found:
	last = data + (off - 1);
	return *last == 0xff ? XDP_DROP : XDP_TX;
}

char LICENSE[] SEC("license") = "GPL";
