// SPDX-License-Identifier: GPL-2.0-only
/*
 * EWTCP (equally weighted TCP), as seed 002 describes it ("for each ACK that is received on path
 * r, the window of path r, w_r, is increased by a/w_r, where a is 1/sqrt(n) and n is the number
 * of paths. When a loss is detected, the window is cut in half"), as a BPF struct_ops
 * tcp_congestion_ops written for mpcoa from that text. Registered as "ewtcp".
 *
 * The increase a/w_r per acknowledged segment is one segment per w_r/a = w_r * sqrt(n)
 * acknowledged segments (tcp_cong_avoid_ai), n the connection's live subflows; sqrt(n) in 4-bit
 * fixed point from a table (n <= 8). The only coupling is n. Slow start, the halving on loss and
 * undo are Reno's. With one subflow, or on a plain TCP socket, EWTCP is Reno.
 *
 * Not RFC 6356's "do no harm": each subflow settles at n^(-1/4) of a TCP flow's window, so n
 * subflows through one bottleneck take n^(3/4) of a TCP flow (1.68 for two); docs/testbed.md
 * has the measurement beside the seed's.
 */
#define CONN_MAP mpcoa_c_ewtcp
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

/* round(16 * sqrt(n)) for n = 0..8 */
static const __u32 sqrt16[MAX_SUBFLOWS + 1] = {16, 16, 23, 28, 32, 36, 39, 42, 45};

static __always_inline __u32 live_subflows(const struct conn_state *st)
{
	__u32 n = 0;
	int i;

	for (i = 0; i < MAX_SUBFLOWS; i++)
		if (slot_live(&st->sf[i]))
			n++;
	return n;
}

SEC("struct_ops")
void BPF_PROG(ewtcp_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct conn_state *st;
	__u64 conn, every;
	__u32 w, n;
	int i;

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	w = tcp_snd_cwnd(tp);
	conn = mptcp_conn_of(sk);
	st = conn ? conn_state_get(conn) : NULL;
	if (!st) {                                  /* plain TCP: Reno */
		tcp_cong_avoid_ai(tp, w, acked);
		return;
	}
	i = slot_index(st, (__u64)sk);
	if (i < 0 || i >= MAX_SUBFLOWS) {
		tcp_cong_avoid_ai(tp, w, acked);
		return;
	}
	slot_refresh(&st->sf[i], sk);
	n = live_subflows(st);
	if (n > MAX_SUBFLOWS)
		n = MAX_SUBFLOWS;
	/* a / w_r per segment == one segment per w_r * sqrt(n) segments */
	every = ((__u64)clamp_cwnd(w) * sqrt16[n]) >> 4;
	if (every < 1)
		every = 1;
	if (every > 0xffffffffULL)
		every = 0xffffffffULL;
	tcp_cong_avoid_ai(tp, (__u32)every, acked);
}

/* Every ACK (also in recovery): keep this subflow's slot current, so n counts it. */
SEC("struct_ops")
void BPF_PROG(ewtcp_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	refresh_own_slot(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(ewtcp_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(ewtcp_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(ewtcp_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_ewtcp = {
	.ssthresh	= (void *)ewtcp_ssthresh,
	.undo_cwnd	= (void *)ewtcp_undo_cwnd,
	.cong_avoid	= (void *)ewtcp_cong_avoid,
	.pkts_acked	= (void *)ewtcp_pkts_acked,
	.release	= (void *)ewtcp_release,
	.name		= "ewtcp",
};
