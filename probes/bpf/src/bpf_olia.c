// SPDX-License-Identifier: GPL-2.0-only
/*
 * OLIA, the Opportunistic Linked-Increases Algorithm (R. Khalili, N. Gast, M. Popovic,
 * J.-Y. Le Boudec, "MPTCP is not Pareto-optimal: performance issues and a possible solution",
 * IEEE/ACM ToN 21(5), 2013; draft-khalili-mptcp-congestion-control-05), as a coupled BPF
 * struct_ops tcp_congestion_ops, written for mpcoa from the paper's equations. Registered as
 * "olia" (the paper's name, which MPCOA campaigns ask for).
 *
 * For each ACK on path r in congestion avoidance (per acknowledged segment):
 *
 *     w_r += (w_r / rtt_r^2) / (sum_p w_p / rtt_p)^2  +  alpha_r / w_r            (ToN eq. 5)
 *
 * with l_r = max(l1_r, l2_r), l1_r the segments delivered between the last two losses on r,
 * l2_r those since the last loss; M the paths with the largest window; B the "best" paths,
 * those maximising l_r / rtt_r^2 (the rate a TCP would get, sqrt(l_r)/rtt_r, is maximal);
 * n the number of paths; and
 *
 *     alpha_r =  1 / (n |B\M|)  if r in B\M != {}
 *     alpha_r = -1 / (n |M|)    if r in M and B\M != {}
 *     alpha_r =  0              otherwise.
 *
 * Loss response is TCP's (w_r/2). With one path, the increase is 1/w: Reno; a plain TCP socket
 * is Reno. The first term is computed relative to rtt_r: (w_r/rtt_r^2)/(sum_p w_p/rtt_p)^2 =
 * w_r / T_r^2 with T_r = sum_p w_p rtt_r / rtt_p.
 */
#define CONN_MAP mpcoa_c_olia
#define SLOT_EXTRA __u32 l1; __u32 l2; __u32 s_n; __u32 s_nm; __u32 s_ncoll; __u32 s_where;
#include "mpcoa_mptcp_cc.h"

char _license[] SEC("license") = "GPL";

#define L_MAX (1U << 22)

struct olia_ca {
	__s64 acc;      /* fractional window increments, FP_ONE = one segment */
};

static __always_inline __u64 l_of(const struct sf_slot *s)
{
	__u32 l = s->l1 > s->l2 ? s->l1 : s->l2;

	return l > L_MAX ? L_MAX : l;
}

/*
 * The per-segment increase of ToN eq. 5 for slot me, in FP (signed).
 *
 * Verifier note: the set sizes and this path's membership are kept in this subflow's own slot
 * through volatile accesses (only this subflow writes them, under its socket lock), not in
 * registers: constants 0/1 in registers would make every combination of branches a distinct
 * verifier state (2^16 paths), while map memory is opaque to it and the paths merge.
 */
static __always_inline __s64 olia_increment(struct conn_state *st, int me)
{
	struct sf_slot *own = &st->sf[me];
	volatile __u32 *n = &own->s_n, *n_m = &own->s_nm, *n_coll = &own->s_ncoll;
	volatile __u32 *where = &own->s_where;   /* 1: own path in B\M, 2: in M */
	__u32 w_r = clamp_cwnd(own->cwnd), r_r = own->srtt_us;
	__u32 wmax = w_r, r_b = r_r ? r_r : 1;
	__u64 l_b = l_of(own), t, term1, term2;
	int i;

	if (!r_r)
		return (__s64)(FP_ONE / w_r);
	*n = 0;
	*n_m = 0;
	*n_coll = 0;
	*where = 0;
	/* max window, best l/rtt^2 (compare l_a * r_b^2 with l_b * r_a^2) */
	for (i = 0; i < MAX_SUBFLOWS; i++) {
		const struct sf_slot *s = &st->sf[i];
		__u64 l;

		if (!slot_live(s))
			continue;
		*n += 1;
		if (clamp_cwnd(s->cwnd) > wmax)
			wmax = clamp_cwnd(s->cwnd);
		l = l_of(s);
		if (l * r_b * r_b > l_b * s->srtt_us * s->srtt_us) {
			l_b = l;
			r_b = s->srtt_us;
		}
	}
	/* |M|, |B \ M|, and where this path is; no loss seen anywhere yet (l_b == 0): B = {} */
	for (i = 0; i < MAX_SUBFLOWS; i++) {
		const struct sf_slot *s = &st->sf[i];

		if (!slot_live(s))
			continue;
		if (clamp_cwnd(s->cwnd) == wmax) {
			*n_m += 1;
			if (i == me)
				*where = 2;
		} else if (l_b && l_of(s) * r_b * r_b == l_b * s->srtt_us * s->srtt_us) {
			*n_coll += 1;
			if (i == me)
				*where = 1;
		}
	}

	t = sum_rate_ref(st, r_r);                   /* T_r, 8-bit fixed point */
	if (t < 256)
		t = 256;
	if (t > 0xffffffffULL)
		t = 0xffffffffULL;
	term1 = ((__u64)w_r << (FP_SHIFT + 16)) / (t * t);

	term2 = 0;
	if (*n_coll && *where == 1)
		term2 = FP_ONE / ((__u64)(*n ? *n : 1) * *n_coll * w_r);
	else if (*n_coll && *where == 2)
		return (__s64)term1 - (__s64)(FP_ONE / ((__u64)(*n ? *n : 1) * (*n_m ? *n_m : 1) * w_r));
	return (__s64)(term1 + term2);
}

SEC("struct_ops")
void BPF_PROG(olia_init, struct sock *sk)
{
	struct olia_ca *ca = inet_csk_ca(sk);

	ca->acc = 0;
}

SEC("struct_ops")
void BPF_PROG(olia_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct olia_ca *ca = inet_csk_ca(sk);
	struct conn_state *st;
	__s64 inc;
	__u64 conn;
	int i;

	if (!tcp_is_cwnd_limited(sk))
		return;
	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	conn = mptcp_conn_of(sk);
	st = conn ? conn_state_get(conn) : NULL;
	i = st ? slot_index(st, (__u64)sk) : -1;
	if (!st || i < 0 || i >= MAX_SUBFLOWS) {    /* plain TCP: Reno */
		tcp_cong_avoid_ai(tp, tcp_snd_cwnd(tp), acked);
		return;
	}
	slot_refresh(&st->sf[i], sk);
	inc = olia_increment(st, i);
	apply_increment(tp, &ca->acc, inc * (__s64)acked);
}

/* Every ACK: refresh the slot and count delivered segments since the last loss (l2_r). */
SEC("struct_ops")
void BPF_PROG(olia_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	__u64 conn = mptcp_conn_of(sk);
	struct conn_state *st;
	int i;

	if (!conn)
		return;
	st = conn_state_get(conn);
	if (!st)
		return;
	i = slot_index(st, (__u64)sk);
	if (i < 0 || i >= MAX_SUBFLOWS)
		return;
	slot_refresh(&st->sf[i], sk);
	st->sf[i].l2 += sample->pkts_acked;
}

/* A loss: l1_r <- l2_r, l2_r <- 0; TCP's halving. */
SEC("struct_ops")
__u32 BPF_PROG(olia_ssthresh, struct sock *sk)
{
	__u64 conn = mptcp_conn_of(sk);
	struct conn_state *st = conn ? bpf_map_lookup_elem(&CONN_MAP, &conn) : NULL;
	int i;

	if (st) {
		i = slot_index(st, (__u64)sk);
		if (i >= 0 && i < MAX_SUBFLOWS) {
			st->sf[i].l1 = st->sf[i].l2;
			st->sf[i].l2 = 0;
		}
	}
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(olia_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC("struct_ops")
void BPF_PROG(olia_release, struct sock *sk)
{
	conn_release(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_olia = {
	.init		= (void *)olia_init,
	.ssthresh	= (void *)olia_ssthresh,
	.undo_cwnd	= (void *)olia_undo_cwnd,
	.cong_avoid	= (void *)olia_cong_avoid,
	.pkts_acked	= (void *)olia_pkts_acked,
	.release	= (void *)olia_release,
	.name		= "olia",
};
