// SPDX-License-Identifier: GPL-2.0-only
/*
 * wVegas, weighted Vegas (Y. Cao, M. Xu, X. Fu, "Delay-based Congestion Control for Multipath
 * TCP", IEEE ICNP 2012), as a coupled BPF struct_ops tcp_congestion_ops, written for mpcoa from
 * the paper's equations. Registered as "wvegas".
 *
 * Each subflow r runs Vegas with its share of the connection's backlog target: once per RTT,
 *
 *     diff_r    = (w_r / baseRTT_r - w_r / rtt_r) * rtt_r   (packets queued by r; paper eq. 1
 *                                                          with the kernel Vegas's scaling)
 *     omega_r   = x_r / sum_k x_k,  x_r = w_r / rtt_r           (weight: r's share of the rate)
 *     alpha_r   = omega_r * alpha_total, beta_r = omega_r * beta_total
 *     w_r += 1 if diff_r < alpha_r;  w_r -= 1 if diff_r > beta_r;  else unchanged,
 *
 * so that the connection as a whole keeps alpha_total..beta_total packets queued, what one
 * single-path Vegas keeps (alpha_total = 2, beta_total = 4: the kernel Vegas defaults, so that
 * wVegas is exactly Vegas on one path and on a plain TCP socket), and moves its rate to the
 * paths where its packets queue least. Slow start, loss response and undo are Vegas's (Reno's
 * halving). The paper's refinement of resetting on a large queueing-delay jump is left out.
 */
#define CONN_MAP mpcoa_c_wvegas
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

#define ALPHA_TOTAL 2
#define BETA_TOTAL  4
#define GAMMA       1

struct wvegas {
	__u32 beg_snd_nxt;     /* right edge during last RTT */
	__u32 cnt_rtt;         /* RTT samples within the last RTT */
	__u32 min_rtt;         /* min RTT within the last RTT (us) */
	__u32 base_rtt;        /* min RTT ever (us) */
	__u8  doing_vegas_now;
};

static __always_inline void wvegas_enable(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct wvegas *v = inet_csk_ca(sk);

	v->doing_vegas_now = 1;
	v->beg_snd_nxt = tp->snd_nxt;
	v->cnt_rtt = 0;
	v->min_rtt = 0x7fffffff;
}

static __always_inline void wvegas_reset(struct sock *sk)
{
	struct wvegas *v = inet_csk_ca(sk);

	v->base_rtt = 0x7fffffff;
	wvegas_enable(sk);
}

/* omega_r in 16-bit fixed point (65536 = the whole connection; plain TCP or alone: 65536) */
static __always_inline __u64 wvegas_weight(struct sock *sk)
{
	__u64 conn = mptcp_conn_of(sk), t, om;
	struct conn_state *st;
	__u32 w;
	int i;

	if (!conn)
		return 1 << 16;
	st = conn_state_get(conn);
	if (!st)
		return 1 << 16;
	i = slot_index(st, (__u64)sk);
	if (i < 0 || i >= MAX_SUBFLOWS)
		return 1 << 16;
	slot_refresh(&st->sf[i], sk);
	if (!st->sf[i].srtt_us)
		return 1 << 16;
	w = clamp_cwnd(st->sf[i].cwnd);
	t = sum_rate_ref(st, st->sf[i].srtt_us);   /* sum_k w_k rtt_r/rtt_k, 8-bit fixed point */
	if (!t)
		return 1 << 16;
	om = ((__u64)w << 24) / t;
	return om > (1 << 16) ? (1 << 16) : om;
}

SEC("struct_ops")
void BPF_PROG(wvegas_init, struct sock *sk)
{
	wvegas_reset(sk);
}

SEC("struct_ops")
void BPF_PROG(wvegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct wvegas *v = inet_csk_ca(sk);
	__u64 conn;
	__u32 vrtt;

	conn = mptcp_conn_of(sk);
	if (conn) {
		struct conn_state *st = conn_state_get(conn);
		int i = st ? slot_index(st, (__u64)sk) : -1;

		if (st && i >= 0 && i < MAX_SUBFLOWS)
			slot_refresh(&st->sf[i], sk);
	}
	if (sample->rtt_us < 0)
		return;
	vrtt = sample->rtt_us + 1;
	if (vrtt < v->base_rtt)
		v->base_rtt = vrtt;
	v->min_rtt = min(v->min_rtt, vrtt);
	v->cnt_rtt++;
}

SEC("struct_ops")
void BPF_PROG(wvegas_state, struct sock *sk, __u8 ca_state)
{
	struct wvegas *v = inet_csk_ca(sk);

	if (ca_state == TCP_CA_Open)
		wvegas_enable(sk);
	else
		v->doing_vegas_now = 0;
}

SEC("struct_ops")
void BPF_PROG(wvegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		wvegas_reset(sk);
}

SEC("struct_ops")
void BPF_PROG(wvegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct wvegas *v = inet_csk_ca(sk);
	__u32 rtt, base, w;
	__u64 diff, om;

	if (!v->doing_vegas_now) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}
	if (!after(ack, v->beg_snd_nxt)) {
		if (tcp_in_slow_start(tp))
			tcp_slow_start(tp, acked);
		return;
	}
	/* once per RTT */
	v->beg_snd_nxt = tp->snd_nxt;
	if (v->cnt_rtt <= 2) {
		tcp_reno_cong_avoid(sk, ack, acked);
		goto wipe;
	}
	rtt = v->min_rtt;
	base = v->base_rtt;
	if (!rtt || !base || rtt < base)
		goto wipe;
	w = tcp_snd_cwnd(tp);
	/* diff_r = w (rtt - base) / base, 16-bit fixed point: the backlog normalised as the
	 * kernel's (and our BPF) Vegas does, so that on one path wVegas decides exactly as Vegas */
	diff = ((__u64)w * (rtt - base) << 16) / base;
	om = wvegas_weight(sk);
	if (diff > ((__u64)GAMMA << 16) * om >> 16 && tcp_in_slow_start(tp)) {
		/* queueing already: leave slow start at the rate actually achieved */
		__u32 target = (__u32)((__u64)w * base / rtt) + 1;

		tcp_snd_cwnd_set(tp, min(w, target));
		tp->snd_ssthresh = min(tp->snd_ssthresh, tcp_snd_cwnd(tp));
	} else if (tcp_in_slow_start(tp)) {
		tcp_slow_start(tp, acked);
	} else if (diff > (__u64)BETA_TOTAL * om) {
		tcp_snd_cwnd_set(tp, w - 1);
		tp->snd_ssthresh = min(tp->snd_ssthresh, tcp_snd_cwnd(tp));
	} else if (diff < (__u64)ALPHA_TOTAL * om) {
		tcp_snd_cwnd_set(tp, w + 1);
	}
	if (tcp_snd_cwnd(tp) < 2)
		tcp_snd_cwnd_set(tp, 2);
	else if (tcp_snd_cwnd(tp) > tp->snd_cwnd_clamp)
		tcp_snd_cwnd_set(tp, tp->snd_cwnd_clamp);
	tp->snd_ssthresh = tcp_current_ssthresh(sk);
wipe:
	v->cnt_rtt = 0;
	v->min_rtt = 0x7fffffff;
}

SEC("struct_ops")
__u32 BPF_PROG(wvegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(wvegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(wvegas_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_wvegas = {
	.init		= (void *)wvegas_init,
	.ssthresh	= (void *)wvegas_ssthresh,
	.undo_cwnd	= (void *)wvegas_undo_cwnd,
	.cong_avoid	= (void *)wvegas_cong_avoid,
	.pkts_acked	= (void *)wvegas_pkts_acked,
	.set_state	= (void *)wvegas_state,
	.cwnd_event	= (void *)wvegas_cwnd_event,
	.release	= (void *)wvegas_release,
	.name		= "wvegas",
};
