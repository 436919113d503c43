/* A token request's round trip, learnt from the renewals the scheduler answered at once (a
 * client alone), and how much sooner than the tail a hook alone asks for the next token so
 * that the queue left at the ask outlasts the round trip (hook/token.c, ask_at).
 *
 * Why learnt: the round trip is the host's.  On the H100's host it took 0.8 ms p50 and 2.3 ms
 * p99 idle, and hook -> scheduler -> hook about 1.8 ms p50 beside a busy program; a pod
 * manager or scheduler on another node adds the network.  A fixed lead leaves the GPU idle for
 * the rest of every round trip it does not cover.
 *
 * How: TCP's retransmission timer's estimate (Jacobson/Karels, RFC 6298): a smoothed round
 * trip and the smoothed mean deviation from it; smoothed + 4 deviations sits above nearly
 * every round trip once a few are seen, and follows a host that slows down within a few.
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_ROUNDTRIP_H
#define GEMINI_ROUNDTRIP_H

#include <stdint.h>

struct gem_roundtrip {
    int64_t smoothed_ns;  /* 0: none seen yet */
    int64_t deviation_ns;
};

/* One round trip of `rtt_ns` (not above 0: ignored). */
void gem_roundtrip_sample(struct gem_roundtrip *r, int64_t rtt_ns);
/* How much sooner than its tail of `tail_ns` to ask: smoothed + 4 deviations - tail, kept
 * within [floor_ns, max_ns]; floor_ns with none seen, and wherever max_ns is below it. */
int64_t gem_roundtrip_early(const struct gem_roundtrip *r, int64_t tail_ns, int64_t floor_ns,
                            int64_t max_ns);

/* How long a reply took to come: received at `received_ns` on our CLOCK_MONOTONIC, sent at
 * `sent_at_s` on its sender's (seconds, as the wire carries it: any double).  -1 where that is
 * not plausible: a send time of 0 or less (not said) or not a number, or one that reads as after
 * the receipt or more than GEM_HOP_PLAUSIBLE_NS before it (another clock).  So a reply later
 * than that is not cut at all: the bound only tells another clock from ours. */
#define GEM_HOP_PLAUSIBLE_NS 5000000
int64_t gem_roundtrip_hop_ns(int64_t received_ns, double sent_at_s);
/* How much of a token of `quota_ns` the hook gives up for a pod manager's reply that took
 * `hop_ns` to come (gem_roundtrip_hop_ns): what it took past GEM_HOP_ALLOWANCE_NS, at most half
 * the token (a hook handed none of it would sleep and ask again); 0 for a hop below 0 or past
 * GEM_HOP_PLAUSIBLE_NS.  The scheduler hands the GPU on as the pod manager's token ends; a reply
 * that comes late ran the hook's token on into the next holder's, and the GPU time-sliced the
 * two (H100, 2026-12-06: replies came 0.12-0.16 ms (p50) after they were sent, p90 0.18-0.24,
 * and on one machine 0.6-0.8 % of them 1.4-3.6 ms, their queue's last kernels finishing
 * 2.2-2.7 ms late).  The allowance keeps the
 * usual hop, so that it costs a token nothing. */
#define GEM_HOP_ALLOWANCE_NS 250000
int64_t gem_roundtrip_late_ns(int64_t hop_ns, int64_t quota_ns);

#endif
