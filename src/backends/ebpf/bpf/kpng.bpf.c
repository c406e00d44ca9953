// SPDX-License-Identifier: GPL-2.0
// kpng socket-level Service load balancing: cgroup sock_addr programs that rewrite the destination
// of connect() and sendmsg() from a Service address to one of its endpoints, and translate it back
// for recvmsg() and getpeername(). Addresses and ports are kept in network byte order. An address
// absent from the maps is left alone: the nft rules of the same kpng process then handle it
// (drops, unknown ports, source ranges).

#include <linux/bpf.h>
#include <linux/in.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>

#define AF_INET 2
#define AF_INET6 10
#define ECONNREFUSED 111
#define MAX_BACKENDS 1024
#define AFFINITY_SCAN 256
// Endpoints per kpng_be entry: a list of n endpoints is ceil(n / 8) entries. The kernel's cost of
// a write is per entry, so a cold start writes an eighth as many as with one entry per endpoint.
#define CHUNK 8

#define SVC_REJECT 1

// A Service frontend: address (IPv4 in the first 4 bytes), port, protocol, family.
struct svc_key {
	__u8 addr[16];
	__u16 port;
	__u8 proto;
	__u8 family;
};

// Which backend list serves a frontend: (id, gen) names its chunks; count == 0 with SVC_REJECT
// refuses. A Service switches to a new list by one update of this value.
struct svc_val {
	__u32 id;
	__u16 count;
	__u16 gen;
	__u32 affinity_sec;
	__u32 flags;
};

// Endpoints chunk*CHUNK … chunk*CHUNK+CHUNK-1 of list (id, gen).
struct be_key {
	__u32 id;
	__u16 gen;
	__u16 chunk;
};

struct be_val {
	__u8 addr[16];
	__u16 port;
	__u8 family;
	__u8 pad;
};

// Past the list's count, the last chunk is zeros (family 0).
struct be_chunk {
	struct be_val be[CHUNK];
};

struct aff_key {
	__u64 netns;
	__u32 id;
	__u32 pad;
};

struct aff_val {
	__u64 seen_ns;
	struct be_val be;
};

// Reverse translation for recvmsg/getpeername: (socket, endpoint) -> Service frontend.
struct rev_key {
	__u64 cookie;
	__u8 addr[16];
	__u16 port;
	__u16 pad;
	__u32 pad2;
};

struct rev_val {
	__u8 addr[16];
	__u16 port;
	__u16 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 262144);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct svc_key);
	__type(value, struct svc_val);
} kpng_svc SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 524288);
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, struct be_key);
	__type(value, struct be_chunk);
} kpng_be SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 65536);
	__type(key, struct aff_key);
	__type(value, struct aff_val);
} kpng_aff SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_LRU_HASH);
	__uint(max_entries, 262144);
	__type(key, struct rev_key);
	__type(value, struct rev_val);
} kpng_rev SEC(".maps");

// The node's network namespace, by inode (kpng writes its own): localhost NodePorts are the
// node's, a pod's 127.0.0.1 is its own. Read through CO-RE: only the fields named here.
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} kpng_node SEC(".maps");

struct ns_common {
	unsigned int inum;
} __attribute__((preserve_access_index));

struct net {
	struct ns_common ns;
} __attribute__((preserve_access_index));

struct nsproxy {
	struct net *net_ns;
} __attribute__((preserve_access_index));

struct task_struct {
	struct nsproxy *nsproxy;
} __attribute__((preserve_access_index));

static __always_inline int in_node_netns(void)
{
	__u32 zero = 0;
	__u64 *node = bpf_map_lookup_elem(&kpng_node, &zero);
	if (!node || *node == 0)
		return 0;
	struct task_struct *task = (struct task_struct *)bpf_get_current_task();
	unsigned int inum = BPF_CORE_READ(task, nsproxy, net_ns, ns.inum);
	return inum == *node;
}

static __always_inline int same_be(const struct be_val *a, const struct be_val *b)
{
	const __u64 *x = (const __u64 *)a->addr, *y = (const __u64 *)b->addr;
	return x[0] == y[0] && x[1] == y[1] && a->port == b->port;
}

// The endpoint remembered for this client (network namespace) if affinity holds and the endpoint
// still serves the Service.
static __always_inline int affinity_pick(struct svc_val *sv, struct aff_key *ak, struct be_val *out)
{
	struct aff_val *av = bpf_map_lookup_elem(&kpng_aff, ak);
	if (!av)
		return 0;
	__u64 now = bpf_ktime_get_ns();
	if (now - av->seen_ns > (__u64)sv->affinity_sec * 1000000000ULL)
		return 0;
	for (__u32 c = 0; c < AFFINITY_SCAN / CHUNK && c * CHUNK < sv->count; c++) {
		struct be_key bk = { .id = sv->id, .gen = sv->gen, .chunk = c };
		struct be_chunk *chunk = bpf_map_lookup_elem(&kpng_be, &bk);
		if (!chunk)
			continue;
		// Past the count, the last chunk is zeros, which no remembered endpoint equals: the
		// inner loop needs no second bound, and verifying the programs takes half as long.
		for (__u32 j = 0; j < CHUNK; j++) {
			if (same_be(&chunk->be[j], &av->be)) {
				*out = chunk->be[j];
				av->seen_ns = now;
				return 1;
			}
		}
	}
	return 0;
}

// 1: rewritten into *be; 0: not a Service, leave alone; -1: refuse.
static __always_inline int pick(struct svc_key *key, struct be_val *be, void *ctx)
{
	for (int attempt = 0; attempt < 2; attempt++) {
		struct svc_val *svp = bpf_map_lookup_elem(&kpng_svc, key);
		if (!svp)
			return 0;
		struct svc_val sv = *svp;
		if (sv.count == 0)
			return (sv.flags & SVC_REJECT) ? -1 : 0;
		struct aff_key ak = { .netns = 0, .id = sv.id };
		if (sv.affinity_sec) {
			ak.netns = bpf_get_netns_cookie(ctx);
			if (affinity_pick(&sv, &ak, be))
				return 1;
		}
		__u32 n = sv.count > MAX_BACKENDS ? MAX_BACKENDS : sv.count;
		__u32 i = bpf_get_prandom_u32() % n;
		struct be_key bk = { .id = sv.id, .gen = sv.gen, .chunk = i / CHUNK };
		struct be_chunk *chunk = bpf_map_lookup_elem(&kpng_be, &bk);
		if (!chunk)
			continue; // the Service switched lists between the two lookups
		*be = chunk->be[i % CHUNK];
		if (sv.affinity_sec) {
			struct aff_val av = { .seen_ns = bpf_ktime_get_ns(), .be = *be };
			bpf_map_update_elem(&kpng_aff, &ak, &av, BPF_ANY);
		}
		return 1;
	}
	return 0;
}

static __always_inline void remember(struct bpf_sock_addr *ctx, struct be_val *be, struct svc_key *key)
{
	struct rev_key rk = { .cookie = bpf_get_socket_cookie(ctx), .port = be->port };
	__builtin_memcpy(rk.addr, be->addr, 16);
	struct rev_val rv = { .port = key->port };
	__builtin_memcpy(rv.addr, key->addr, 16);
	bpf_map_update_elem(&kpng_rev, &rk, &rv, BPF_ANY);
}

static __always_inline int refuse(void)
{
	bpf_set_retval(-ECONNREFUSED);
	return 0;
}

static __always_inline int forward4(struct bpf_sock_addr *ctx, int reverse)
{
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	struct svc_key key = { .port = (__u16)ctx->user_port, .proto = proto, .family = 4 };
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(key.addr, &ip, 4);
	// 127.0.0.0/8 frontends are localhost NodePorts: the node's loopback only.
	if (key.addr[0] == 127 && !in_node_netns())
		return 1;
	struct be_val be = {};
	int r = pick(&key, &be, ctx);
	if (r < 0)
		return refuse();
	if (r == 0 || be.family != 4)
		return 1;
	__u32 dst;
	__builtin_memcpy(&dst, be.addr, 4);
	ctx->user_ip4 = dst;
	ctx->user_port = be.port;
	if (reverse)
		remember(ctx, &be, &key);
	return 1;
}

static __always_inline int forward6(struct bpf_sock_addr *ctx, int reverse)
{
	__u8 proto = ctx->protocol;
	if (proto != IPPROTO_TCP && proto != IPPROTO_UDP)
		return 1;
	struct svc_key key = { .port = (__u16)ctx->user_port, .proto = proto, .family = 6 };
	__u32 a[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };
	__builtin_memcpy(key.addr, a, 16);
	struct be_val be = {};
	int r = pick(&key, &be, ctx);
	if (r < 0)
		return refuse();
	if (r == 0 || be.family != 6)
		return 1;
	__builtin_memcpy(a, be.addr, 16);
	ctx->user_ip6[0] = a[0];
	ctx->user_ip6[1] = a[1];
	ctx->user_ip6[2] = a[2];
	ctx->user_ip6[3] = a[3];
	ctx->user_port = be.port;
	if (reverse)
		remember(ctx, &be, &key);
	return 1;
}

// Replies and peer names: an endpoint this socket was sent to shows as the Service frontend.
static __always_inline int reverse4(struct bpf_sock_addr *ctx)
{
	struct rev_key rk = { .cookie = bpf_get_socket_cookie(ctx), .port = (__u16)ctx->user_port };
	__u32 ip = ctx->user_ip4;
	__builtin_memcpy(rk.addr, &ip, 4);
	struct rev_val *rv = bpf_map_lookup_elem(&kpng_rev, &rk);
	if (!rv)
		return 1;
	__builtin_memcpy(&ip, rv->addr, 4);
	ctx->user_ip4 = ip;
	ctx->user_port = rv->port;
	return 1;
}

static __always_inline int reverse6(struct bpf_sock_addr *ctx)
{
	struct rev_key rk = { .cookie = bpf_get_socket_cookie(ctx), .port = (__u16)ctx->user_port };
	__u32 a[4] = { ctx->user_ip6[0], ctx->user_ip6[1], ctx->user_ip6[2], ctx->user_ip6[3] };
	__builtin_memcpy(rk.addr, a, 16);
	struct rev_val *rv = bpf_map_lookup_elem(&kpng_rev, &rk);
	if (!rv)
		return 1;
	__builtin_memcpy(a, rv->addr, 16);
	ctx->user_ip6[0] = a[0];
	ctx->user_ip6[1] = a[1];
	ctx->user_ip6[2] = a[2];
	ctx->user_ip6[3] = a[3];
	ctx->user_port = rv->port;
	return 1;
}

SEC("cgroup/connect4")
int kpng_connect4(struct bpf_sock_addr *ctx) { return forward4(ctx, 1); }

SEC("cgroup/connect6")
int kpng_connect6(struct bpf_sock_addr *ctx) { return forward6(ctx, 1); }

SEC("cgroup/sendmsg4")
int kpng_sendmsg4(struct bpf_sock_addr *ctx) { return forward4(ctx, 1); }

SEC("cgroup/sendmsg6")
int kpng_sendmsg6(struct bpf_sock_addr *ctx) { return forward6(ctx, 1); }

SEC("cgroup/recvmsg4")
int kpng_recvmsg4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/recvmsg6")
int kpng_recvmsg6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

SEC("cgroup/getpeername4")
int kpng_getpeername4(struct bpf_sock_addr *ctx) { return reverse4(ctx); }

SEC("cgroup/getpeername6")
int kpng_getpeername6(struct bpf_sock_addr *ctx) { return reverse6(ctx); }

// A socket's entry goes with it. Without this, every TCP connection through a Service would keep
// one until the LRU evicts it, and that churn would evict the entries of long-lived connected UDP
// sockets too (their replies' source, and their cut when an endpoint leaves, need them). The
// entries of an unconnected UDP socket (one per endpoint it sent to) are left to the LRU.
SEC("cgroup/sock_release")
int kpng_sock_release(struct bpf_sock *sk)
{
	struct rev_key rk = { .port = (__u16)sk->dst_port };
	if (rk.port == 0)
		return 1;
	if (sk->family == AF_INET) {
		__u32 ip = sk->dst_ip4;
		__builtin_memcpy(rk.addr, &ip, 4);
	} else if (sk->family == AF_INET6) {
		__u32 a[4] = { sk->dst_ip6[0], sk->dst_ip6[1], sk->dst_ip6[2], sk->dst_ip6[3] };
		__builtin_memcpy(rk.addr, a, 16);
	} else {
		return 1;
	}
	rk.cookie = bpf_get_socket_cookie(sk);
	bpf_map_delete_elem(&kpng_rev, &rk);
	return 1;
}

char LICENSE[] SEC("license") = "GPL";
