/* An IPv6 extension-header walk in a function of its own (not inlined), advancing a
 * cursor that lives in its caller's stack, as parsing helpers shared between programs
 * do: each header's length (`(hdrlen + 1) * 8`, `(hdrlen + 2) * 4` for AH, 8 for a
 * fragment) is added to the packet pointer and the result stored back through the
 * cursor pointer. On the last iteration of the bounded loop the advanced pointer is
 * only stored, never read back from the register: the length's bounds still decide
 * whether the addition is allowed.
 *
 * -DUNBOUNDED_LEN takes the length from a 32-bit field instead of an 8-bit one: the
 * cursor may then lie beyond what a bounds check can prove, and the read through it
 * must be refused (as the kernel refuses it). */
#include <linux/bpf.h>
#include <linux/if_ether.h>
#include <linux/in.h>
#include <linux/ipv6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define MAX_EXT 6

/* Unrolled by default; -DLOOPS keeps the walk a bounded loop. */
#ifdef LOOPS
#define UNROLL _Pragma("nounroll")
#else
#define UNROLL _Pragma("unroll")
#endif

struct cursor {
	void *end;
	void *pos;
};

struct ext_hdr {
	__u8 next;
	__u8 len;
	__u16 pad;
	__u32 word;
};

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, __u64);
} l4_seen SEC(".maps");

static __attribute__((noinline)) int skip_ext(struct cursor *c, int next)
{
	UNROLL
	for (int i = 0; i < MAX_EXT; i++) {
		struct ext_hdr *h = c->pos;
		__u64 len;

		if ((void *)h + 2 > c->end)
			return -1;
#ifdef UNBOUNDED_LEN
		if ((void *)(h + 1) > c->end)
			return -1;
		len = (__u64)h->word * 8;
#else
		len = ((__u64)h->len + 1) * 8;
#endif
		switch (next) {
		case IPPROTO_HOPOPTS:
		case IPPROTO_ROUTING:
		case IPPROTO_DSTOPTS:
		case 135: /* mobility */
			c->pos = (void *)h + len;
			break;
		case IPPROTO_AH:
			c->pos = (void *)h + ((__u64)h->len + 2) * 4;
			break;
		case IPPROTO_FRAGMENT:
			c->pos = (void *)h + 8;
			break;
		default:
			return next;
		}
		next = h->next;
	}
	return -1;
}

static __attribute__((noinline)) int parse(struct xdp_md *ctx, struct cursor *c)
{
	struct ipv6hdr *ip6;
	struct ethhdr *eth;

	c->pos = (void *)(long)ctx->data;
	c->end = (void *)(long)ctx->data_end;
	eth = c->pos;
	if ((void *)(eth + 1) > c->end)
		return -1;
	if (eth->h_proto != bpf_htons(ETH_P_IPV6))
		return -2;
	ip6 = (void *)(eth + 1);
	if ((void *)(ip6 + 1) > c->end)
		return -1;
	c->pos = ip6 + 1;
	return skip_ext(c, ip6->nexthdr);
}

SEC("xdp")
int ext_cursor(struct xdp_md *ctx)
{
	struct cursor c;
	__u8 *l4;
	__u64 *n;
	__u32 key;
	int proto = parse(ctx, &c);

	if (proto == -2)
		return XDP_PASS;
	if (proto < 0)
		return XDP_DROP;
	key = proto & 0xff;
	n = bpf_map_lookup_elem(&l4_seen, &key);
	if (n)
		*n += 1;
	/* The first bytes of the transport header, through the cursor the walk moved. */
	l4 = c.pos;
	if ((void *)(l4 + 4) > c.end)
		return XDP_DROP;
	if (proto == IPPROTO_TCP && l4[2] == 0 && l4[3] == 22)
		return XDP_DROP;
	return XDP_PASS;
}

char _license[] SEC("license") = "GPL";
