// SPDX-License-Identifier: GPL-2.0-only
/*
 * TCP Hybla as a BPF struct_ops tcp_congestion_ops.
 *
 * Ported for mpcoa from the Linux kernel's net/ipv4/tcp_hybla.c (Daniele Lacamera,
 * GPL-2.0-only), Linux 6.x version. Algorithm: C. Caini, R. Firrincieli, "TCP Hybla: a TCP
 * enhancement for heterogeneous networks", Int. J. Satellite Communications, 2004.
 * Registered under the kernel module's name "hybla" (not built into this kernel).
 *
 * Differences from the kernel module, none of which changes the window arithmetic:
 *  - rtt0 is a compile-time constant (25 ms, the module parameter's default);
 *  - hybla_init() does not set snd_cwnd_clamp = 65535: BPF congestion controls may not write
 *    that field. The clamp only matters above 65535 segments;
 *  - the "while (snd_cwnd_cents >= 128)" loop runs at most once (cents < 128 before adding an
 *    odd part < 128), so it is written as an "if".
 */
#include "mpcoa_tcp_ca.h"

char _license[] SEC("license") = "GPL";

#define USEC_PER_MSEC 1000U

/* Hybla reference round trip time (default = 1/40 sec = 25 ms), in ms */
static const __u32 rtt0 = 25;

struct hybla {
	bool  hybla_en;
	__u32 snd_cwnd_cents; /* Keeps increment values when it is <1, <<7 */
	__u32 rho;            /* Rho parameter, integer part  */
	__u32 rho2;           /* Rho * Rho, integer part */
	__u32 rho_3ls;        /* Rho parameter, <<3 */
	__u32 rho2_7ls;       /* Rho^2, <<7 */
	__u32 minrtt_us;      /* Minimum smoothed round trip time value seen */
};

/* This is called to refresh values for hybla parameters */
static __always_inline void hybla_recalc_param(struct sock *sk)
{
	struct hybla *ca = inet_csk_ca(sk);
	__u32 r = tcp_sk(sk)->srtt_us / (rtt0 * USEC_PER_MSEC);

	ca->rho_3ls = max(r, 8U);
	ca->rho = ca->rho_3ls >> 3;
	ca->rho2_7ls = (ca->rho_3ls * ca->rho_3ls) << 1;
	ca->rho2 = ca->rho2_7ls >> 7;
}

SEC("struct_ops")
void BPF_PROG(hybla_init, struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hybla *ca = inet_csk_ca(sk);

	ca->rho = 0;
	ca->rho2 = 0;
	ca->rho_3ls = 0;
	ca->rho2_7ls = 0;
	ca->snd_cwnd_cents = 0;
	ca->hybla_en = true;
	tcp_snd_cwnd_set(tp, 2);

	/* 1st Rho measurement based on initial srtt */
	hybla_recalc_param(sk);

	/* set minimum rtt as this is the 1st ever seen */
	ca->minrtt_us = tp->srtt_us;
	tcp_snd_cwnd_set(tp, ca->rho);
}

SEC("struct_ops")
void BPF_PROG(hybla_state, struct sock *sk, __u8 ca_state)
{
	struct hybla *ca = inet_csk_ca(sk);

	ca->hybla_en = (ca_state == TCP_CA_Open);
}

static __always_inline __u32 hybla_fraction(__u32 odds)
{
	switch (odds) {
	case 0: return 128;
	case 1: return 139;
	case 2: return 152;
	case 3: return 165;
	case 4: return 181;
	case 5: return 197;
	case 6: return 215;
	case 7: return 234;
	default: return 128;
	}
}

/* TCP Hybla main routine.
 *     o Recalc Hybla parameters if min_rtt has changed
 *     o Give cwnd a new value based on the model proposed
 *     o remember increments <1
 */
SEC("struct_ops")
void BPF_PROG(hybla_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct hybla *ca = inet_csk_ca(sk);
	__u32 increment, odd, rho_fractions;
	int is_slowstart = 0;

	/*  Recalculate rho only if this srtt is the lowest */
	if (tp->srtt_us < ca->minrtt_us) {
		hybla_recalc_param(sk);
		ca->minrtt_us = tp->srtt_us;
	}

	if (!tcp_is_cwnd_limited(sk))
		return;

	if (!ca->hybla_en) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}

	if (ca->rho == 0)
		hybla_recalc_param(sk);

	rho_fractions = ca->rho_3ls - (ca->rho << 3);

	if (tcp_in_slow_start(tp)) {
		/* slow start: INC = 2^RHO - 1, computed <<7 as (2^int) * [(2^fract) << 7] */
		is_slowstart = 1;
		increment = ((1U << min(ca->rho, 16U)) * hybla_fraction(rho_fractions)) - 128;
	} else {
		/* congestion avoidance: INC = RHO^2 / W, already <<7 */
		increment = ca->rho2_7ls / tcp_snd_cwnd(tp);
		if (increment < 128)
			tp->snd_cwnd_cnt++;
	}

	odd = increment % 128;
	tcp_snd_cwnd_set(tp, tcp_snd_cwnd(tp) + (increment >> 7));
	ca->snd_cwnd_cents += odd;

	/* check when fractions goes >=128 and increase cwnd by 1 (at most once, see above). */
	if (ca->snd_cwnd_cents >= 128) {
		tcp_snd_cwnd_set(tp, tcp_snd_cwnd(tp) + 1);
		ca->snd_cwnd_cents -= 128;
		tp->snd_cwnd_cnt = 0;
	}
	/* check when cwnd has not been incremented for a while */
	if (increment == 0 && odd == 0 && tp->snd_cwnd_cnt >= tcp_snd_cwnd(tp)) {
		tcp_snd_cwnd_set(tp, tcp_snd_cwnd(tp) + 1);
		tp->snd_cwnd_cnt = 0;
	}
	/* clamp down slowstart cwnd to ssthresh value. */
	if (is_slowstart)
		tcp_snd_cwnd_set(tp, min(tcp_snd_cwnd(tp), tp->snd_ssthresh));

	tcp_snd_cwnd_set(tp, min(tcp_snd_cwnd(tp), tp->snd_cwnd_clamp));
}

SEC("struct_ops")
__u32 BPF_PROG(hybla_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(hybla_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_hybla = {
	.init		= (void *)hybla_init,
	.ssthresh	= (void *)hybla_ssthresh,
	.undo_cwnd	= (void *)hybla_undo_cwnd,
	.cong_avoid	= (void *)hybla_cong_avoid,
	.set_state	= (void *)hybla_state,
	.name		= "hybla",
};
