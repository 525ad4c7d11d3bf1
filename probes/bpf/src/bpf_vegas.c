// SPDX-License-Identifier: GPL-2.0-only
/*
 * TCP Vegas as a BPF struct_ops tcp_congestion_ops.
 *
 * Ported for mpcoa from the Linux kernel's net/ipv4/tcp_vegas.c and tcp_vegas.h (Stephen
 * Hemminger et al., GPL-2.0-only), Linux 6.x version. Algorithm: L. S. Brakmo, L. L. Peterson,
 * "TCP Vegas: End to end congestion avoidance on a global internet", IEEE JSAC 13(8), 1995.
 * Registered under the kernel module's name "vegas" (not built into this kernel).
 *
 * Differences from the kernel module:
 *  - no get_info (the INET_DIAG_VEGASINFO netlink record): BPF congestion controls cannot
 *    implement get_info, so `ss -i` shows no "vegas:" line; the control itself is unchanged;
 *  - alpha, beta, gamma are compile-time constants (the module parameters' defaults 2, 4, 1).
 */
#include "mpcoa_tcp_ca.h"

char _license[] SEC("license") = "GPL";

static const __u32 alpha = 2;
static const __u32 beta  = 4;
static const __u32 gamma = 1;

/* Vegas variables (tcp_vegas.h) */
struct vegas {
	__u32 beg_snd_nxt;     /* right edge during last RTT */
	__u32 beg_snd_una;     /* left edge  during last RTT */
	__u32 beg_snd_cwnd;    /* saves the size of the cwnd */
	__u8  doing_vegas_now; /* if true, do vegas for this RTT */
	__u16 cntRTT;          /* # of RTTs measured within last RTT */
	__u32 minRTT;          /* min of RTTs measured within last RTT (in usec) */
	__u32 baseRTT;         /* the min of all Vegas RTT measurements seen (in usec) */
};

/* Re-start Vegas (connection established, after RTO / fast recovery, restart from idle):
 * wait until the completion of an RTT during which we actually receive ACKs.
 */
static __always_inline void vegas_enable(struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);
	struct vegas *vegas = inet_csk_ca(sk);

	/* Begin taking Vegas samples next time we send something. */
	vegas->doing_vegas_now = 1;

	/* Set the beginning of the next send window. */
	vegas->beg_snd_nxt = tp->snd_nxt;

	vegas->cntRTT = 0;
	vegas->minRTT = 0x7fffffff;
}

/* Stop taking Vegas samples for now. */
static __always_inline void vegas_disable(struct sock *sk)
{
	struct vegas *vegas = inet_csk_ca(sk);

	vegas->doing_vegas_now = 0;
}

static __always_inline void vegas_init(struct sock *sk)
{
	struct vegas *vegas = inet_csk_ca(sk);

	vegas->baseRTT = 0x7fffffff;
	vegas_enable(sk);
}

SEC("struct_ops")
void BPF_PROG(vegas_init_op, struct sock *sk)
{
	vegas_init(sk);
}

/* RTT sampling: min-filter within an RTT (minRTT) and forever (baseRTT). */
SEC("struct_ops")
void BPF_PROG(vegas_pkts_acked, struct sock *sk, const struct ack_sample *sample)
{
	struct vegas *vegas = inet_csk_ca(sk);
	__u32 vrtt;

	if (sample->rtt_us < 0)
		return;

	/* Never allow zero rtt or baseRTT */
	vrtt = sample->rtt_us + 1;

	/* Filter to find propagation delay: */
	if (vrtt < vegas->baseRTT)
		vegas->baseRTT = vrtt;

	/* Find the min RTT during the last RTT to find the current prop. delay + queuing delay: */
	vegas->minRTT = min(vegas->minRTT, vrtt);
	vegas->cntRTT++;
}

SEC("struct_ops")
void BPF_PROG(vegas_state, struct sock *sk, __u8 ca_state)
{
	if (ca_state == TCP_CA_Open)
		vegas_enable(sk);
	else
		vegas_disable(sk);
}

/* Restarting from idle: reset the Vegas state and wait for fresh RTT samples. */
SEC("struct_ops")
void BPF_PROG(vegas_cwnd_event, struct sock *sk, enum tcp_ca_event event)
{
	if (event == CA_EVENT_CWND_RESTART || event == CA_EVENT_TX_START)
		vegas_init(sk);
}

static __always_inline __u32 tcp_vegas_ssthresh(struct tcp_sock *tp)
{
	return min(tp->snd_ssthresh, tcp_snd_cwnd(tp));
}

SEC("struct_ops")
void BPF_PROG(vegas_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct vegas *vegas = inet_csk_ca(sk);

	if (!vegas->doing_vegas_now) {
		tcp_reno_cong_avoid(sk, ack, acked);
		return;
	}

	if (after(ack, vegas->beg_snd_nxt)) {
		/* Do the Vegas once-per-RTT cwnd adjustment. */

		/* Save the extent of the current window for the end of the next RTT. */
		vegas->beg_snd_nxt = tp->snd_nxt;

		/* Only with enough RTT samples (> 2) to have one not from a delayed ACK. */
		if (vegas->cntRTT <= 2) {
			/* Not enough RTT samples: behave like Reno. */
			tcp_reno_cong_avoid(sk, ack, acked);
		} else {
			__u32 rtt, diff, base;
			__u64 target_cwnd;

			/* The min RTT seen during the last RTT. */
			rtt = vegas->minRTT;
			base = vegas->baseRTT;
			/* cntRTT > 2 means both were set from samples (>= 1); guard for the
			 * verifier's sake (division by zero yields 0 in BPF, never traps).
			 */
			if (!rtt || !base)
				goto wipe;

			/* The cwnd we should have: (actual rate in segments) * baseRTT */
			target_cwnd = (__u64)tcp_snd_cwnd(tp) * base;
			target_cwnd = target_cwnd / rtt;

			/* The "Diff" from the Arizona Vegas papers (u32 arithmetic as in the kernel) */
			diff = tcp_snd_cwnd(tp) * (rtt - base) / base;

			if (diff > gamma && tcp_in_slow_start(tp)) {
				/* Going too fast: match the actual rate, +1 for truncation, and
				 * switch to congestion avoidance.
				 */
				tcp_snd_cwnd_set(tp, min(tcp_snd_cwnd(tp), (__u32)target_cwnd + 1));
				tp->snd_ssthresh = tcp_vegas_ssthresh(tp);
			} else if (tcp_in_slow_start(tp)) {
				/* Slow start. */
				tcp_slow_start(tp, acked);
			} else {
				/* Congestion avoidance. */
				if (diff > beta) {
					/* The old window was too fast, so we slow down. */
					tcp_snd_cwnd_set(tp, tcp_snd_cwnd(tp) - 1);
					tp->snd_ssthresh = tcp_vegas_ssthresh(tp);
				} else if (diff < alpha) {
					/* Not enough extra packets in the network: speed up. */
					tcp_snd_cwnd_set(tp, tcp_snd_cwnd(tp) + 1);
				} else {
					/* Sending just as fast as we should be. */
				}
			}

			if (tcp_snd_cwnd(tp) < 2)
				tcp_snd_cwnd_set(tp, 2);
			else if (tcp_snd_cwnd(tp) > tp->snd_cwnd_clamp)
				tcp_snd_cwnd_set(tp, tp->snd_cwnd_clamp);

			tp->snd_ssthresh = tcp_current_ssthresh(sk);
		}
wipe:
		/* Wipe the slate clean for the next RTT. */
		vegas->cntRTT = 0;
		vegas->minRTT = 0x7fffffff;
	}
	/* Use normal slow start */
	else if (tcp_in_slow_start(tp))
		tcp_slow_start(tp, acked);
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_ssthresh, struct sock *sk)
{
	return tcp_reno_ssthresh(sk);
}

SEC("struct_ops")
__u32 BPF_PROG(vegas_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_vegas = {
	.init		= (void *)vegas_init_op,
	.ssthresh	= (void *)vegas_ssthresh,
	.undo_cwnd	= (void *)vegas_undo_cwnd,
	.cong_avoid	= (void *)vegas_cong_avoid,
	.pkts_acked	= (void *)vegas_pkts_acked,
	.set_state	= (void *)vegas_state,
	.cwnd_event	= (void *)vegas_cwnd_event,
	.name		= "vegas",
};
