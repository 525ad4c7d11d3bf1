// SPDX-License-Identifier: GPL-2.0-only
/*
 * Tom Kelly's Scalable TCP as a BPF struct_ops tcp_congestion_ops.
 *
 * Ported for mpcoa from the Linux kernel's net/ipv4/tcp_scalable.c (John Heffner, GPL-2.0-only),
 * Linux 6.x version: additive increase of 1 segment per min(cwnd, 100) ACKed segments
 * (about +1 % of cwnd per RTT once cwnd >= 100), multiplicative decrease to 7/8 of cwnd.
 * Registered under the kernel module's name "scalable" (not built into this kernel).
 */
#include "mpcoa_tcp_ca.h"

char _license[] SEC("license") = "GPL";

/* These factors derived from the recommended values in the paper: .01 and 7/8. */
#define TCP_SCALABLE_AI_CNT	100U
#define TCP_SCALABLE_MD_SCALE	3

SEC("struct_ops")
void BPF_PROG(scalable_cong_avoid, struct sock *sk, __u32 ack, __u32 acked)
{
	struct tcp_sock *tp = tcp_sk(sk);

	if (!tcp_is_cwnd_limited(sk))
		return;

	if (tcp_in_slow_start(tp)) {
		acked = tcp_slow_start(tp, acked);
		if (!acked)
			return;
	}
	tcp_cong_avoid_ai(tp, min(tcp_snd_cwnd(tp), TCP_SCALABLE_AI_CNT), acked);
}

SEC("struct_ops")
__u32 BPF_PROG(scalable_ssthresh, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	return max(tcp_snd_cwnd(tp) - (tcp_snd_cwnd(tp) >> TCP_SCALABLE_MD_SCALE), 2U);
}

SEC("struct_ops")
__u32 BPF_PROG(scalable_undo_cwnd, struct sock *sk)
{
	return tcp_reno_undo_cwnd(sk);
}

SEC(".struct_ops")
struct tcp_congestion_ops mpcoa_scalable = {
	.ssthresh	= (void *)scalable_ssthresh,
	.undo_cwnd	= (void *)scalable_undo_cwnd,
	.cong_avoid	= (void *)scalable_cong_avoid,
	.name		= "scalable",
};
