/* The burst applet: one send becomes N packets or N destinations. doTx redirects each
 * frame the client sends with BPF_F_BROADCAST through the devmap `fanout`: the adapter
 * sends one copy out of the port of every entry (the host fills the entries with
 * ifindexes; an ifindex may repeat, so N entries naming one port send N copies there).
 * With `fanout` empty the frame is dropped, as the kernel drops a broadcast with no
 * target. sends[0] counts the frames fanned out. */
#include <spine_helpers.h>

#define FANOUT_MAX 16

struct {
	__uint(type, BPF_MAP_TYPE_DEVMAP);
	__uint(max_entries, FANOUT_MAX);
	__type(key, __u32);
	__type(value, __u32);
} fanout SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} sends SEC(".maps");

SEC("xdp")
int pass(struct xdp_md *ctx)
{
	return XDP_PASS;
}

SEC("spine/applet/tx")
int do_tx(struct xdp_md *ctx)
{
	__u32 k = 0;
	__u64 *n = bpf_map_lookup_elem(&sends, &k);

	if (n)
		__sync_fetch_and_add(n, 1);
	return bpf_redirect_map(&fanout, 0, BPF_F_BROADCAST);
}

char LICENSE[] SEC("license") = "GPL";
