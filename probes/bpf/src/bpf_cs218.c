// SPDX-License-Identifier: GPL-2.0-only
/*
 * Seed 002's own MPTCP congestion control ("CS218_ALGO"), as a BPF struct_ops
 * tcp_congestion_ops written for mpcoa from the seed's text (section 3.2.3). Registered as
 * "cs218".
 *
 * The seed's increase is the Linked Increase Algorithm's (RFC 6356) plus a *delay window*: on
 * each ACK of subflow r,
 *
 *     ackCount_r++
 *     DWND = (ackCount_r > 5) ? alpha * bestRTT_r / lastRTT_r : 0
 *     increase by alpha + DWND (in LIA's units: alpha / w_total per segment)
 *     bestRTT_r = min(bestRTT_r, lastRTT_r)
 *
 * and on a loss ackCount_r = 0 and w_r = w_r / 2. Five ACKs in a row without a loss are the
 * seed's sign of an uncongested subflow; the delay window doubles LIA's increase there while the
 * RTT stays at its best and fades as queueing raises it, so a congested path behaves as LIA.
 *
 * Our reading, where the text leaves it open: LIA's cap min(alpha/w_total, 1/w_r) (RFC 6356) is
 * kept for the alpha part, the delay window scales it by (1 + bestRTT/lastRTT), "lastRTT" is the
 * latest RTT sample of the subflow's ACKs and "bestRTT" the least seen; slow start and undo are
 * Reno's. One segment per max(D, w_r) / (1 + f) acknowledged segments (tcp_cong_avoid_ai), with
 * D LIA's denominator and f the delay window's fraction in 4-bit fixed point. With one subflow
 * and f = 0 it is Reno; on a plain TCP socket it is Reno with the delay window.
 */
#define CONN_MAP mpcoa_c_cs218
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

/* the seed's threshold of consecutive ACKs */
#define CONSECUTIVE_ACKS 5

struct cs218_ca {
	__u32 ack_count;     /* ACKs since the last loss */
	__u32 best_rtt_us;   /* the least RTT sample seen, 0 before the first */
	__u32 last_rtt_us;   /* the latest RTT sample */
};

/* 16 * bestRTT / lastRTT once the subflow has had more than five ACKs in a row, else 0 */
static __always_inline __u32 delay_fraction16(const struct cs218_ca *ca)
{
	if (ca->ack_count <= CONSECUTIVE_ACKS || !ca->best_rtt_us || !ca->last_rtt_us)
		return 0;
	if (ca->best_rtt_us >= ca->last_rtt_us)
		return 16;
	return (__u32)(((__u64)ca->best_rtt_us << 4) / ca->last_rtt_us);
}

SEC("struct_ops")
void BPF_PROG(cs218_init, struct sock *sk)
{
	struct cs218_ca *ca = inet_csk_ca(sk);

	ca->ack_count = 0;
	ca->best_rtt_us = 0;
	ca->last_rtt_us = 0;
}

SEC("struct_ops")
void BPF_PROG(cs218_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct cs218_ca *ca = inet_csk_ca(sk);
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
	d = w;                                      /* plain TCP: Reno's 1/w_r */
	conn = mptcp_conn_of(sk);
	st = conn ? conn_state_get(conn) : NULL;
	if (st) {
		i = slot_index(st, (__u64)sk);
		if (i >= 0 && i < MAX_SUBFLOWS) {
			slot_refresh(&st->sf[i], sk);
			d = lia_denominator(st);
			if (d < w)                  /* min(alpha/w_total, 1/w_r) */
				d = w;
		}
	}
	/* (alpha + DWND) per segment == one segment per d / (1 + f) segments */
	d = (d << 4) / (16 + delay_fraction16(ca));
	if (d < 1)
		d = 1;
	if (d > 0xffffffffULL)
		d = 0xffffffffULL;
	tcp_cong_avoid_ai(tp, (__u32)d, acked);
}

/* Every ACK: count it, keep the RTTs, and keep this subflow's slot current for the others. */
SEC("struct_ops")
void BPF_PROG(cs218_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct cs218_ca *ca = inet_csk_ca(sk);

	ca->ack_count++;
	if (sample->rtt_us > 0) {
		ca->last_rtt_us = (__u32)sample->rtt_us;
		if (!ca->best_rtt_us || ca->last_rtt_us < ca->best_rtt_us)
			ca->best_rtt_us = ca->last_rtt_us;
	}
	refresh_own_slot(sk);
}

/* A loss: the run of ACKs ends and the window halves (Reno's, as the seed keeps it). */
SEC("struct_ops")
__u32 BPF_PROG(cs218_ssthresh, struct sock *sk)
{
	struct cs218_ca *ca = inet_csk_ca(sk);

	ca->ack_count = 0;
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(cs218_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(cs218_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_cs218 = {
	.init		= (void *)cs218_init,
	.ssthresh	= (void *)cs218_ssthresh,
	.undo_cwnd	= (void *)cs218_undo_cwnd,
	.cong_avoid	= (void *)cs218_cong_avoid,
	.pkts_acked	= (void *)cs218_pkts_acked,
	.release	= (void *)cs218_release,
	.name		= "cs218",
};
