/* A retry's pause drawn at random from the upper half of its backoff step ("equal jitter"):
 * between pause_ns / 2 and pause_ns.
 *
 * Why: every hook of a pod manager that restarted lost it at the same instant, and with fixed
 * steps they all came back at the same instants (50, 150, 350 ms ... after), each time a burst
 * of connections and announces for the new pod manager to take in at once; jittered, they
 * spread over each step.  Half the step at least, so that the backoff still backs off.
 *
 * How: xorshift64* over a state the caller keeps (seeded with anything but 0).
 *
 * Pure: no globals, no clock.  Also fed to cffi's cdef: declarations and integer #defines. */
#ifndef GEMINI_JITTER_H
#define GEMINI_JITTER_H

#include <stdint.h>

/* A pause within [pause_ns / 2, pause_ns] (pause_ns itself where it is below 2), moving
 * *state on (a state of 0 is taken as 1). */
int64_t gem_jitter_ns(int64_t pause_ns, uint64_t *state);

#endif
