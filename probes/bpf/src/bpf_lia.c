// SPDX-License-Identifier: GPL-2.0-only
/*
 * LIA, the Linked Increases Algorithm of RFC 6356 (C. Raiciu, M. Handley, D. Wischik, "Coupled
 * Congestion Control for Multipath Transport Protocols", 2011), as a coupled BPF struct_ops
 * tcp_congestion_ops, written for mpcoa from the RFC's equations. Registered as "lia".
 *
 * RFC 6356 section 3 (in segments instead of bytes; MSS_i cancels): for each ACK on subflow i
 * in congestion avoidance, with w_i its window and rtt_i its RTT,
 *
 *     increase w_i by  min( alpha / w_total , 1 / w_i )  per acknowledged segment,
 *
 *     alpha = w_total * max_i(w_i / rtt_i^2) / (sum_i w_i / rtt_i)^2.           (RFC eq. 2)
 *
 * so alpha / w_total = 1/D with D = (sum_k w_k/rtt_k)^2 / max_k(w_k/rtt_k^2). Writing m for
 * the subflow attaining the max, D = (sum_k w_k * rtt_m / rtt_k)^2 / w_m, and the increase is
 * one segment per max(D, w_i) acknowledged segments (tcp_cong_avoid_ai). Slow start, loss
 * response (w_i/2) and undo are TCP's (RFC 6356 section 3: "the decrease ... is unchanged").
 * With one subflow D = w_1 and LIA is Reno; a plain TCP socket is Reno.
 */
#define CONN_MAP mpcoa_c_lia
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

SEC("struct_ops")
void BPF_PROG(lia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct conn_state *st;
	__u64 conn, d;
	__u32 w;
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
	d = lia_denominator(st);
	/* min(alpha/w_total, 1/w_i) per segment == 1 / max(D, w_i) */
	if (d < w)
		d = w;
	if (d > 0xffffffffULL)
		d = 0xffffffffULL;
	tcp_cong_avoid_ai(tp, (__u32)d, acked);
}

/* Every ACK (also in recovery): keep this subflow's slot current for the others. */
SEC("struct_ops")
void BPF_PROG(lia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	refresh_own_slot(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lia_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(lia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(lia_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_lia = {
	.ssthresh	= (void *)lia_ssthresh,
	.undo_cwnd	= (void *)lia_undo_cwnd,
	.cong_avoid	= (void *)lia_cong_avoid,
	.pkts_acked	= (void *)lia_pkts_acked,
	.release	= (void *)lia_release,
	.name		= "lia",
};
