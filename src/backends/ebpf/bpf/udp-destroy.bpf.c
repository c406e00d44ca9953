// SPDX-License-Identifier: GPL-2.0
// Connected UDP sockets to endpoints that left their Service: a UDP socket iterator that destroys
// every socket connected to an (address, port) kpng put in kpng_udp_gone. connect() translated the
// Service address once, so such a socket would keep sending to the gone endpoint; destroyed, it
// fails with ECONNABORTED and a resolver that connects again gets a live endpoint. A separate
// object from kpng.bpf.o: bpf_sock_destroy needs Linux 6.5, and the balancing programs must load
// without it. Each socket the iterator acts on prints one line: bpf_sock_destroy's result.

#include <linux/bpf.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define AF_INET 2
#define AF_INET6 10
// A UDP socket that connect() fixed to one peer is in TCP_ESTABLISHED.
#define SK_ESTABLISHED 1

// The same layout as kpng.bpf.c's be_val: an endpoint (address, port, family).
struct gone_key {
	__u8 addr[16];
	__u16 port;
	__u8 family;
	__u8 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, struct gone_key);
	__type(value, __u8);
} kpng_udp_gone SEC(".maps");

// The kernel's types, only the fields read here; CO-RE places them as the running kernel does.
struct in6_addr {
	union {
		__be32 u6_addr32[4];
	} in6_u;
} __attribute__((preserve_access_index));

struct sock_common {
	__be32 skc_daddr;
	__be16 skc_dport;
	unsigned short skc_family;
	volatile unsigned char skc_state;
	struct in6_addr skc_v6_daddr;
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
	struct gone_key key = { .port = sk->__sk_common.skc_dport };
	unsigned short family = sk->__sk_common.skc_family;
	if (family == AF_INET) {
		__be32 a = sk->__sk_common.skc_daddr;
		__builtin_memcpy(key.addr, &a, 4);
		key.family = 4;
	} else if (family == AF_INET6) {
		__u32 w[4];
		for (int i = 0; i < 4; i++)
			w[i] = sk->__sk_common.skc_v6_daddr.in6_u.u6_addr32[i];
		// An IPv6 socket connected to an IPv4 address (::ffff:a.b.c.d) talks IPv4.
		if (w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0xffff)) {
			__builtin_memcpy(key.addr, &w[3], 4);
			key.family = 4;
		} else {
			__builtin_memcpy(key.addr, w, 16);
			key.family = 6;
		}
	} else {
		return 0;
	}
	if (!bpf_map_lookup_elem(&kpng_udp_gone, &key))
		return 0;
	__u64 result = (__u64)(__s64)bpf_sock_destroy((struct sock_common *)sk);
	static const char fmt[] = "%lld\n";
	bpf_seq_printf(ctx->meta->seq, fmt, sizeof(fmt), &result, sizeof(result));
	return 0;
}

char LICENSE[] SEC("license") = "GPL";
