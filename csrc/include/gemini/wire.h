/* The wire protocol: Gemini v1's byte layout (spec §2) plus new types.
 * The Python twin is gemini/core/wire.py; tests/native/test_wire_layout.py checks they agree.
 *
 *   request  (80 B) = u64 name_len | name | NUL | i32 req_id | i32 type | payload | zero fill
 *   response (40 B) = i32 req_id | payload (32 B) | i32 status
 *
 * Pure: no sockets, no globals.  This header is also fed to cffi's cdef, so it holds no
 * preprocessor logic beyond plain #defines of integers. */
#ifndef GEMINI_WIRE_H
#define GEMINI_WIRE_H

#include <stddef.h>
#include <stdint.h>

#define GEM_REQ_MSG_LEN 80
#define GEM_RSP_MSG_LEN 40
#define GEM_MAX_NAME_LEN 47
#define GEM_RSP_STATUS_OFFSET 36
#define GEM_NOTIFY_ID -1
/* A token cut short (gemini/core/wire.py CUT_ID): unsolicited, in the QUOTA reply's layout,
 * quota_ms what is left of the token held, from sent_at. */
#define GEM_CUT_ID -2
/* PROCESS's features: the hook applies GEM_CUT_ID notices (only such a hook is sent one). */
#define GEM_PROCESS_READS_CUTS 1

enum gem_request_type {
    GEM_REQ_QUOTA = 0,      /* f64 overuse_ms, f64 next_burst_ms[, f64 gpu_wait_ms[, f32 run_ms,
                             * u32 run_launches]] -> f64 quota_ms, u32 flags, u32 sharers,
                             * f64 sent_at (the sender's CLOCK_MONOTONIC, s: the scheduler's
                             * when it made the grant, the pod manager's when it sent this
                             * reply; 0: not said) */
    GEM_REQ_MEM_LIMIT = 1,  /* -> u64 used, u64 limit, u64 flags (GEM_MEM_FLAG_*) */
    GEM_REQ_MEM_UPDATE = 2, /* u64 bytes, i32 is_allocate (GEM_MEM_*) -> i32 verdict */
    GEM_REQ_STATUS = 3,     /* -> u64 body_len, then body */
    GEM_REQ_REPORT = 4,     /* u64 mem_used, i32 processes, i32 waiting[, f32 delivery_ms
                             * beside names of up to 43 bytes[, u32 features (bit 0: it
                             * applies GEM_CUT_ID) beside names of up to 39]] -> ack (pod
                             * manager -> scheduler; beside a longer name the pod manager
                             * sends its alias, as for QUOTA; the hook sends none) */
    GEM_REQ_HELLO = 5,      /* 16 bytes proof -> ack */
    GEM_REQ_PROCESS = 6,    /* i32 my_pid, i32 index[, u32 features] -> i32 count, i32 pid,
                             * u64 bytes */
    /* pod manager -> hook, unsolicited (id GEM_NOTIFY_ID): u64 bytes a neighbour lacks.
     * hook -> pod manager, the answer: u64 bytes of unspent lease given back -> ack. */
    GEM_REQ_RECALL = 7
};

/* MEM_UPDATE's is_allocate: a lease (bytes reserved ahead, spent locally) is granted only if
 * it fits now; an allocation that does not fit may wait while the pod manager recalls the
 * client's other processes' unspent leases.  A claim is bytes a process already holds on the
 * GPU, said again to a pod manager it reached anew: always counted, over the limit too (a pod
 * manager from before 2026-12-05 takes it as an allocation, and may refuse it). */
#define GEM_MEM_FREE 0
#define GEM_MEM_ALLOC 1
#define GEM_MEM_LEASE 2
#define GEM_MEM_CLAIM 3

/* Bits of the MEM_LIMIT reply's flags word (frame offset 20; v1 peers send zero there). */
#define GEM_MEM_FLAG_UNIFIED_MEMORY 1
#define GEM_MEM_FLAG_EVICT_ON_RELEASE 2

/* Bits of the QUOTA reply's flags word (frame offset 12; v1 peers send zero there).
 * ALONE: when the token was granted no other client of its group wanted the GPU, and the
 * client is not capped, so running a little past the token's end costs no one anything. */
#define GEM_QUOTA_FLAG_ALONE 1
/* CALIBRATION: a capped client's calibration grant: run it through (no early hand-back at a
 * sync), mark its queue often, and measure what ran in its last GEM_RUN_MEASURE_MS only (the
 * clock has settled). */
#define GEM_QUOTA_FLAG_CALIBRATION 2

enum gem_status {
    GEM_STATUS_OK = 0,
    GEM_STATUS_UNKNOWN_CLIENT = 1,
    GEM_STATUS_BAD_REQUEST = 2,
    GEM_STATUS_CLIENT_REMOVED = 3,
    GEM_STATUS_NOT_AUTHORIZED = 4
};

/* A QUOTA request's third word (not in v1): gpu_wait_ms, how long the launching threads waited
 * on the GPU since the last request (held for a full queue, or in a sync).  It fits the frame
 * beside a name of up to this many bytes; a peer that sends a longer one whole leaves it out
 * (not said). */
#define GEM_QUOTA_GPU_WAIT_NAME_MAX 39
/* Its fourth and fifth words (not in v1): f32 run_ms and u32 run_launches, the GPU time and the
 * launches of the queue segments the hook measured running back to back in the token before
 * the one this request hands back (whose queue may still run; in a calibration token, in its
 * last GEM_RUN_MEASURE_MS only): the GPU time per launch, against the
 * same program's in a calibration, says how much faster its kernels run in its grants than
 * when it runs continuously (gemini/core/speed.py).  Beside a name of up to this many bytes; 0
 * launches: none measured (v1 peers).  (Our encoders send a longer name's alias instead, below;
 * the two limits tell a receiver what a peer that sends the whole name left out.) */
#define GEM_QUOTA_RUN_NAME_MAX 31
#define GEM_RUN_MEASURE_MS 40
/* Beside a longer name a QUOTA request names its client by an alias, so that every word fits:
 * '#' and the 16 hex digits of the name's FNV-1a 64-bit hash (no config name starts with '#';
 * the pod manager and the scheduler map it back).  A long name then costs its client nothing:
 * without these words a cap is charged the GPU clock's speed-up in full, or read from the clock
 * alone (gemini/core/speed.py). */
#define GEM_QUOTA_ALIAS_LEN 17
/* The alias of `name` into out (GEM_QUOTA_ALIAS_LEN bytes and a NUL), hashed over its first
 * GEM_MAX_NAME_LEN bytes (a longer name is refused by every encoder). */
void gem_wire_quota_alias(const char *name, char *out);
/* run_launches' top bit: the count is of graph launches (a program whose graph replays carry
 * most of its GPU time, hook/inflight_measure.c), the GPU time every segment's; below it, the
 * count. */
#define GEM_RUN_GRAPHS 2147483648
#define GEM_RUN_COUNT_MAX 2147483647
/* The run_launches word for `count` launches, or graph launches (count cut at the max). */
uint32_t gem_wire_run_word(uint64_t count, int graphs);

/* Each encoder writes a whole zero-filled frame into buf and returns its length,
 * or -1 if the name is empty, has a NUL or is longer than GEM_MAX_NAME_LEN. */
int gem_wire_encode_quota(uint8_t *buf, const char *name, int32_t req_id,
                          double overuse_ms, double burst_ms, double gpu_wait_ms,
                          float run_ms, uint32_t run_launches);
int gem_wire_encode_mem_limit(uint8_t *buf, const char *name, int32_t req_id);
int gem_wire_encode_mem_update(uint8_t *buf, const char *name, int32_t req_id,
                               uint64_t bytes, int32_t is_allocate);
int gem_wire_encode_hello(uint8_t *buf, const char *name, int32_t req_id,
                          const uint8_t *proof16);
/* PROCESS: the sender's pid, and which of the client's processes to describe (index < 0:
 * none, the request only tells the pod manager who is on this connection), and what the
 * sender reads (GEM_PROCESS_READS_CUTS). */
int gem_wire_encode_process(uint8_t *buf, const char *name, int32_t req_id, int32_t my_pid,
                            int32_t index, uint32_t features);

int gem_wire_encode_recall(uint8_t *buf, const char *name, int32_t req_id, uint64_t bytes);

/* Response readers: buf is one GEM_RSP_MSG_LEN frame. */
int32_t gem_wire_rsp_id(const uint8_t *buf);
int32_t gem_wire_rsp_status(const uint8_t *buf);
double gem_wire_rsp_quota_ms(const uint8_t *buf);
uint32_t gem_wire_rsp_quota_flags(const uint8_t *buf);
/* How many of the client's processes share its token (frame offset 16; 0: not said). */
uint32_t gem_wire_rsp_quota_sharers(const uint8_t *buf);
/* When the sender sent it, on its CLOCK_MONOTONIC in seconds (frame offset 20; 0: not said). */
double gem_wire_rsp_quota_sent_at(const uint8_t *buf);
int32_t gem_wire_rsp_verdict(const uint8_t *buf);
void gem_wire_rsp_mem_limit(const uint8_t *buf, uint64_t *used, uint64_t *limit);
uint64_t gem_wire_rsp_mem_flags(const uint8_t *buf);
/* PROCESS reply: how many processes the client has, and the pid and bytes of the one asked for
 * (pid 0 when the index is out of range). */
void gem_wire_rsp_process(const uint8_t *buf, int32_t *count, int32_t *pid, uint64_t *bytes);
/* A RECALL notification: the bytes the waiting allocation lacks. */
uint64_t gem_wire_rsp_recall_bytes(const uint8_t *buf);

#endif
