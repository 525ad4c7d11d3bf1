// SPDX-License-Identifier: GPL-2.0-only
/*
 * BALIA, Balanced Linked Adaptation (Q. Peng, A. Walid, J. Hwang, S. H. Low, "Multipath TCP:
 * Analysis, Design, and Implementation", IEEE/ACM ToN 24(1), 2016; draft-walid-mptcp-
 * congestion-control-04), as a coupled BPF struct_ops tcp_congestion_ops, written for mpcoa
 * from the paper's equations. Registered as "balia".
 *
 * With x_r = w_r / rtt_r and alpha_r = max_k x_k / x_r:
 *
 *   for each ACK on path r:  w_r += (x_r / rtt_r) / (sum_k x_k)^2
 *                                   * (1 + alpha_r)/2 * (4 + alpha_r)/5         (ToN eq. 19)
 *   for each loss on path r: w_r -= (w_r / 2) * min(alpha_r, 1.5)
 *
 * (x_r/rtt_r)/(sum_k x_k)^2 = w_r / T_r^2 with T_r = sum_k w_k rtt_r / rtt_k, and
 * alpha_r = max_k (w_k rtt_r / rtt_k) / w_r. With one path alpha = 1, the factor is 1 and the
 * decrease w/2: Reno; a plain TCP socket is Reno.
 */
#define CONN_MAP mpcoa_c_balia
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

#define ALPHA_MAX (1U << 16)   /* alpha_r in 8-bit fixed point, clamped to 256 */

struct balia_ca {
	__s64 acc;      /* fractional window increments, FP_ONE = one segment */
};

/* alpha_r = max_k x_k / x_r, 8-bit fixed point */
static __always_inline __u64 balia_alpha(const struct conn_state *st, int me)
{
	const struct sf_slot *own = &st->sf[me];
	__u32 w_r = clamp_cwnd(own->cwnd), r_r = own->srtt_us;
	__u64 best = 0, a;
	int i;

	if (!r_r)
		return 256;
	for (i = 0; i < MAX_SUBFLOWS; i++) {
		const struct sf_slot *s = &st->sf[i];
		__u64 x;

		if (!slot_live(s))
			continue;
		x = ((__u64)clamp_cwnd(s->cwnd) * r_r << 8) / s->srtt_us;
		if (x > best)
			best = x;
	}
	a = best / w_r;
	if (a < 256)
		a = 256;       /* x_r itself is among the k: alpha_r >= 1 */
	return a > ALPHA_MAX ? ALPHA_MAX : a;
}

static __always_inline struct conn_state *balia_state(struct sock *sk, int *idx)
{
	__u64 conn = mptcp_conn_of(sk);
	struct conn_state *st;
	int i;

	if (!conn)
		return NULL;
	st = conn_state_get(conn);
	if (!st)
		return NULL;
	i = slot_index(st, (__u64)sk);
	if (i < 0 || i >= MAX_SUBFLOWS)
		return NULL;
	slot_refresh(&st->sf[i], sk);
	*idx = i;
	return st;
}

SEC("struct_ops")
void BPF_PROG(balia_init, struct sock *sk)
{
	struct balia_ca *ca = inet_csk_ca(sk);

	ca->acc = 0;
}

SEC("struct_ops")
void BPF_PROG(balia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct balia_ca *ca = inet_csk_ca(sk);
	struct conn_state *st;
	__u64 t, a, term1, inc;
	__u32 w_r;
	int i = 0;

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	st = balia_state(sk, &i);
	if (!st || i < 0 || i >= MAX_SUBFLOWS || !st->sf[i].srtt_us) {   /* plain TCP: Reno */
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
		return;
	}
	w_r = clamp_cwnd(st->sf[i].cwnd);
	t = sum_rate_ref(st, st->sf[i].srtt_us);    /* T_r, 8-bit fixed point */
	if (t < 256)
		t = 256;
	if (t > 0xffffffffULL)
		t = 0xffffffffULL;
	term1 = ((__u64)w_r << (FP_SHIFT + 16)) / (t * t);
	a = balia_alpha(st, i);
	/* (1 + alpha)/2 * (4 + alpha)/5 = (256 + A)(1024 + A) / (10 * 2^16), A = 256 alpha */
	inc = term1 * ((256 + a) * (1024 + a)) / (10ULL << 16);
	apply_increment(tp, &ca->acc, (__s64)(inc * acked));
}

SEC("struct_ops")
void BPF_PROG(balia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	int i = 0;

	balia_state(sk, &i);
}

/* w_r - (w_r/2) min(alpha_r, 1.5) */
SEC("struct_ops")
__u32 BPF_PROG(balia_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	__u32 w = tcp_snd_cwnd(tp), cut;
	struct conn_state *st;
	__u64 a;
	int i = 0;

	st = balia_state(sk, &i);
	if (!st || i < 0 || i >= MAX_SUBFLOWS || !st->sf[i].srtt_us)
		return tcp_reno_ssthresh(sk);
	a = balia_alpha(st, i);
	if (a > 384)
		a = 384;
	cut = (__u32)(((__u64)w * a) >> 9);
	return w > cut + 2 ? w - cut : 2;
}

SEC("struct_ops")
__u32 BPF_PROG(balia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(balia_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_balia = {
	.init		= (void *)balia_init,
	.ssthresh	= (void *)balia_ssthresh,
	.undo_cwnd	= (void *)balia_undo_cwnd,
	.cong_avoid	= (void *)balia_cong_avoid,
	.pkts_acked	= (void *)balia_pkts_acked,
	.release	= (void *)balia_release,
	.name		= "balia",
};
