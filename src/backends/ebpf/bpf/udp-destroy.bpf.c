// SPDX-License-Identifier: GPL-2.0
// Connected UDP sockets to endpoints that left their Service: a UDP socket iterator that destroys
// every connected socket whose cookie kpng put in kpng_udp_gone. connect() translated the
// Service address once, so such a socket would keep sending to the gone endpoint; destroyed, it
// fails with ECONNABORTED and a resolver that connects again gets a live endpoint. A separate
// object from kpng.bpf.o: bpf_sock_destroy needs Linux 6.5, and the balancing programs must load
// without it. Each socket the iterator acts on prints one line: bpf_sock_destroy's result.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>

// A UDP socket that connect() fixed to one peer is in TCP_ESTABLISHED.
#define SK_ESTABLISHED 1

// The sockets to destroy, by socket cookie. kpng finds them in kpng.bpf.c's kpng_rev, which the
// connect programs fill with (cookie, endpoint) -> the Service frontend the socket was connected
// through: only a socket connected to a gone endpoint through a frontend that no longer sends there
// is cut, never one connected to the same endpoint through another Service, or straight to it.
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 65536);
	__type(key, __u64);
	__type(value, __u8);
} kpng_udp_gone SEC(".maps");

// The kernel's types, only the fields read here; CO-RE places them as the running kernel does.
struct sock_common {
	volatile unsigned char skc_state;
} __attribute__((preserve_access_index));

struct sock {
	struct sock_common __sk_common;
} __attribute__((preserve_access_index));

struct udp_sock;
struct seq_file;

struct bpf_iter_meta {
	struct seq_file *seq;
} __attribute__((preserve_access_index));

struct bpf_iter__udp {
	struct bpf_iter_meta *meta;
	struct udp_sock *udp_sk;
} __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym;

SEC("iter/udp")
int kpng_udp_destroy(struct bpf_iter__udp *ctx)
{
	struct sock *sk = (struct sock *)ctx->udp_sk;
	if (!sk || sk->__sk_common.skc_state != SK_ESTABLISHED)
		return 0;
	__u64 cookie = bpf_get_socket_cookie(sk);
	if (!bpf_map_lookup_elem(&kpng_udp_gone, &cookie))
		return 0;
	__u64 result = (__u64)(__s64)bpf_sock_destroy((struct sock_common *)sk);
	static const char fmt[] = "%lld\n";
	bpf_seq_printf(ctx->meta->seq, fmt, sizeof(fmt), &result, sizeof(result));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
