/* SPDX-License-Identifier: GPL-2.0 */
/*
 * Coupling machinery for MPTCP congestion controls written as per-subflow BPF struct_ops
 * tcp_congestion_ops (mpcoa). Upstream Linux has no coupled MPTCP control; every subflow of an
 * MPTCP connection is an ordinary TCP socket whose congestion control only sees itself. Here a
 * subflow finds its MPTCP connection through BTF: a subflow's icsk_ulp_data is its
 * struct mptcp_subflow_context, whose ->conn is the MPTCP socket. That pointer keys a BPF hash
 * map whose value holds one slot per subflow (window, smoothed RTT, per-CC figures); each
 * subflow refreshes its own slot on every ACK and reads the others' to compute the coupled
 * increase (or decrease). A slot is claimed with a compare-and-swap and freed in the
 * struct_ops `release` callback; the last subflow to leave deletes the map entry, and the map
 * itself dies with the programs when the struct_ops map is unregistered.
 *
 * A socket without the MPTCP ULP (plain TCP) gets conn == 0 and each control falls back to its
 * uncoupled base (Reno for LIA/OLIA/BALIA, Vegas for wVegas).
 *
 * Before including, a control defines CONN_MAP (the hash map's name, <= 15 chars) and may
 * define SLOT_EXTRA (more per-subflow fields).
 *
 * Written for mpcoa from the kernel's struct definitions (BTF); GPL-2.0 like the kernel.
 */
#ifndef MPCOA_MPTCP_CC_H
#define MPCOA_MPTCP_CC_H

#include "mpcoa_tcp_ca.h"
#include <bpf/bpf_core_read.h>

#ifndef CONN_MAP
#error "define CONN_MAP before including mpcoa_mptcp_cc.h"
#endif
#ifndef SLOT_EXTRA
#define SLOT_EXTRA
#endif

/* The in-kernel path manager allows at most 8 subflows per connection (MPTCP_PM_MAX_SUBFLOWS). */
#define MAX_SUBFLOWS 8
/* RTTs are clamped to 2^20 us (~1 s) and windows to 2^16 so that every product below fits in
 * 64 bits (w * r^2 <= 2^56). */
#define RTT_MAX   (1U << 20)
#define CWND_MAX  (1U << 16)
/* fixed point used for fractional per-ACK window increments */
#define FP_SHIFT  20
#define FP_ONE    (1ULL << FP_SHIFT)

struct sf_slot {
	__u64 sk;       /* the subflow's struct sock *, 0 = free slot */
	__u32 cwnd;     /* its snd_cwnd (segments) */
	__u32 srtt_us;  /* its smoothed RTT (us), >= 1 once known */
	SLOT_EXTRA
};

struct conn_state {
	struct sf_slot sf[MAX_SUBFLOWS];
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 4096);
	__type(key, __u64);
	__type(value, struct conn_state);
} CONN_MAP SEC(".maps");

/* a zeroed value for creating entries (too large for the 512-byte BPF stack in some CCs) */
static struct conn_state zero_state;

/* The MPTCP connection (struct mptcp_sock *, as an integer key) a subflow belongs to, 0 for a
 * plain TCP socket. tcp_sock.is_mptcp is set on subflows only; icsk_ulp_data is then the
 * struct mptcp_subflow_context (net/mptcp/protocol.h: mptcp_subflow_ctx()). */
static __always_inline __u64 mptcp_conn_of(struct sock *sk)
{
	struct tcp_sock *tp = tcp_sk(sk);
	struct mptcp_subflow_context *ctx;
	struct sock *conn = NULL;

	if (!tp->is_mptcp)
		return 0;
	ctx = (struct mptcp_subflow_context *)inet_csk(sk)->icsk_ulp_data;
	if (!ctx)
		return 0;
	if (bpf_core_read(&conn, sizeof(conn), &ctx->conn))
		return 0;
	return (__u64)conn;
}

static __always_inline __u32 clamp_rtt(__u32 r)
{
	return r < 1 ? 1 : (r > RTT_MAX ? RTT_MAX : r);
}

static __always_inline __u32 clamp_cwnd(__u32 w)
{
	return w < 1 ? 1 : (w > CWND_MAX ? CWND_MAX : w);
}

/* The connection's shared state, created on first use. */
static __always_inline struct conn_state *conn_state_get(__u64 conn)
{
	struct conn_state *st;

	st = bpf_map_lookup_elem(&CONN_MAP, &conn);
	if (st)
		return st;
	bpf_map_update_elem(&CONN_MAP, &conn, &zero_state, BPF_NOEXIST);
	return bpf_map_lookup_elem(&CONN_MAP, &conn);
}

/* This subflow's slot index in st, claiming a free one if it has none; -1 when all are taken. */
static __always_inline int slot_index(struct conn_state *st, __u64 me)
{
	int i;

	for (i = 0; i < MAX_SUBFLOWS; i++)
		if (st->sf[i].sk == me)
			return i;
	for (i = 0; i < MAX_SUBFLOWS; i++) {
		if (st->sf[i].sk == 0 &&
		    __sync_val_compare_and_swap(&st->sf[i].sk, 0, me) == 0)
			return i;
	}
	return -1;
}

/* Refresh this subflow's window and RTT in its slot. */
static __always_inline void slot_refresh(struct sf_slot *s, struct sock *sk)
{
	const struct tcp_sock *tp = tcp_sk(sk);

	s->cwnd = tcp_snd_cwnd(tp);
	if (tp->srtt_us)
		s->srtt_us = clamp_rtt(tp->srtt_us >> 3);
}

/* The subflow is going away (or switching CC): free its slot; the last one deletes the entry. */
static __always_inline void conn_release(struct sock *sk)
{
	__u64 conn = mptcp_conn_of(sk), me = (__u64)sk;
	struct conn_state *st;
	int i, left = 0;

	if (!conn)
		return;
	st = bpf_map_lookup_elem(&CONN_MAP, &conn);
	if (!st)
		return;
	for (i = 0; i < MAX_SUBFLOWS; i++)
		if (st->sf[i].sk == me)
			__sync_val_compare_and_swap(&st->sf[i].sk, me, 0);
	for (i = 0; i < MAX_SUBFLOWS; i++)
		if (st->sf[i].sk)
			left++;
	if (!left)
		bpf_map_delete_elem(&CONN_MAP, &conn);
}

/* A slot that takes part in the coupling: in use, with a window and an RTT sample. */
static __always_inline bool slot_live(const struct sf_slot *s)
{
	return s->sk && s->cwnd && s->srtt_us;
}

/*
 * T_ref = sum_k w_k * r_ref / r_k, in 8-bit fixed point: the connection's aggregate rate
 * sum_k w_k/rtt_k expressed in windows per r_ref. Used by LIA, OLIA and BALIA, whose increase
 * terms divide by (sum_k w_k/rtt_k)^2.
 */
static __always_inline __u64 sum_rate_ref(const struct conn_state *st, __u32 r_ref)
{
	__u64 t = 0;
	int i;

	for (i = 0; i < MAX_SUBFLOWS; i++) {
		const struct sf_slot *s = &st->sf[i];

		if (!slot_live(s))
			continue;
		t += ((__u64)clamp_cwnd(s->cwnd) * r_ref << 8) / s->srtt_us;
	}
	return t;
}

/* Add a signed per-ACK increment (FP_ONE = one segment) to the window through an accumulator,
 * like tcp_cong_avoid_ai does with snd_cwnd_cnt; the window stays within [2, clamp]. */
static __always_inline void apply_increment(struct tcp_sock *tp, __s64 *acc, __s64 inc)
{
	__u32 w = tcp_snd_cwnd(tp);

	*acc += inc;
	if (*acc >= (__s64)FP_ONE) {
		__u64 n = (__u64)*acc >> FP_SHIFT;

		*acc -= (__s64)(n << FP_SHIFT);
		w += (__u32)n;
		if (w > tp->snd_cwnd_clamp)
			w = tp->snd_cwnd_clamp;
	} else if (*acc <= -(__s64)FP_ONE) {
		__u64 n = (__u64)(-*acc) >> FP_SHIFT;

		*acc += (__s64)(n << FP_SHIFT);
		w = w > n + 2 ? w - (__u32)n : 2;
	}
	tcp_snd_cwnd_set(tp, w);
}

/*
 * LIA's increase denominator (RFC 6356): one segment per D acknowledged segments, with
 * D = (sum_k w_k/rtt_k)^2 / max_k(w_k/rtt_k^2) in segments, 0 when no subflow is live.
 * Writing m for the subflow attaining the max, D = (sum_k w_k * rtt_m / rtt_k)^2 / w_m.
 * Used by LIA and by seed 002's control, whose increase is LIA's plus a delay window.
 */
static __always_inline __u64 lia_denominator(const struct conn_state *st)
{
	__u32 wm = 0, rm = 1;
	__u64 t;
	int i;

	/* m = argmax w_k / rtt_k^2: compare w_a * r_b^2 with w_b * r_a^2 */
	for (i = 0; i < MAX_SUBFLOWS; i++) {
		const struct sf_slot *s = &st->sf[i];
		__u32 w;

		if (!slot_live(s))
			continue;
		w = clamp_cwnd(s->cwnd);
		if (!wm || (__u64)w * rm * rm > (__u64)wm * s->srtt_us * s->srtt_us) {
			wm = w;
			rm = s->srtt_us;
		}
	}
	if (!wm)
		return 0;
	t = sum_rate_ref(st, rm) >> 4;            /* sum_k w_k rtt_m / rtt_k, 4-bit fixed point */
	if (t > 0xffffffffULL)
		t = 0xffffffffULL;
	return ((t * t) / wm) >> 8;
}

/* Keep this subflow's slot current for its siblings: called on every ACK (also in recovery). */
static __always_inline void refresh_own_slot(struct sock *sk)
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
	if (i >= 0 && i < MAX_SUBFLOWS)
		slot_refresh(&st->sf[i], sk);
}

#endif /* MPCOA_MPTCP_CC_H */
