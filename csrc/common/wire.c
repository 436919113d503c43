/* Wire encoding for the hook; see wire.h.  memcpy keeps it alignment-free and little-endian on
 * the x86-64 and aarch64 hosts we support (the v1 format is native little-endian). */
#include "gemini/wire.h"

#include <string.h>

static int put_head(uint8_t *buf, const char *name, int32_t req_id, int32_t type)
{
    size_t len = strnlen(name, GEM_MAX_NAME_LEN + 1);
    if (len == 0 || len > GEM_MAX_NAME_LEN)
        return -1;
    uint64_t len64 = len;
    memset(buf, 0, GEM_REQ_MSG_LEN);
    memcpy(buf, &len64, 8);
    memcpy(buf + 8, name, len); /* buf[8 + len] stays the NUL */
    memcpy(buf + 9 + len, &req_id, 4);
    memcpy(buf + 13 + len, &type, 4);
    return (int)(17 + len); /* payload offset */
}

_Static_assert(GEM_QUOTA_ALIAS_LEN <= GEM_QUOTA_RUN_NAME_MAX, "an alias leaves room for every word");

void gem_wire_quota_alias(const char *name, char *out)
{
    static const char hex[] = "0123456789abcdef";
    uint64_t h = 14695981039346656037ULL; /* FNV-1a 64 */
    size_t len = strnlen(name, GEM_MAX_NAME_LEN);
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)name[i];
        h *= 1099511628211ULL;
    }
    out[0] = '#';
    for (int i = 0; i < 16; i++)
        out[1 + i] = hex[(h >> (60 - 4 * i)) & 0xf];
    out[GEM_QUOTA_ALIAS_LEN] = '\0';
}

int gem_wire_encode_quota(uint8_t *buf, const char *name, int32_t req_id,
                          double overuse_ms, double burst_ms, double gpu_wait_ms,
                          float run_ms, uint32_t run_launches)
{
    char alias[GEM_QUOTA_ALIAS_LEN + 1];
    size_t len = strnlen(name, GEM_MAX_NAME_LEN + 1);
    if (len > GEM_QUOTA_RUN_NAME_MAX && len <= GEM_MAX_NAME_LEN) {
        gem_wire_quota_alias(name, alias);
        name = alias;
    }
    int off = put_head(buf, name, req_id, GEM_REQ_QUOTA);
    if (off < 0)
        return -1;
    memcpy(buf + off, &overuse_ms, 8);
    memcpy(buf + off + 8, &burst_ms, 8);
    memcpy(buf + off + 16, &gpu_wait_ms, 8);
    memcpy(buf + off + 24, &run_ms, 4);
    memcpy(buf + off + 28, &run_launches, 4);
    return GEM_REQ_MSG_LEN;
}

uint32_t gem_wire_run_word(uint64_t count, int graphs)
{
    uint32_t word = count > GEM_RUN_COUNT_MAX ? GEM_RUN_COUNT_MAX : (uint32_t)count;
    return graphs ? word | (uint32_t)GEM_RUN_GRAPHS : word;
}

int gem_wire_encode_mem_limit(uint8_t *buf, const char *name, int32_t req_id)
{
    return put_head(buf, name, req_id, GEM_REQ_MEM_LIMIT) < 0 ? -1 : GEM_REQ_MSG_LEN;
}

int gem_wire_encode_mem_update(uint8_t *buf, const char *name, int32_t req_id,
                               uint64_t bytes, int32_t is_allocate)
{
    int off = put_head(buf, name, req_id, GEM_REQ_MEM_UPDATE);
    if (off < 0)
        return -1;
    memcpy(buf + off, &bytes, 8);
    memcpy(buf + off + 8, &is_allocate, 4);
    return GEM_REQ_MSG_LEN;
}

int gem_wire_encode_hello(uint8_t *buf, const char *name, int32_t req_id,
                          const uint8_t *proof16)
{
    int off = put_head(buf, name, req_id, GEM_REQ_HELLO);
    if (off < 0)
        return -1;
    memcpy(buf + off, proof16, 16);
    return GEM_REQ_MSG_LEN;
}

int gem_wire_encode_process(uint8_t *buf, const char *name, int32_t req_id, int32_t my_pid,
                            int32_t index, uint32_t features)
{
    int off = put_head(buf, name, req_id, GEM_REQ_PROCESS);
    if (off < 0)
        return -1;
    memcpy(buf + off, &my_pid, 4);
    memcpy(buf + off + 4, &index, 4);
    memcpy(buf + off + 8, &features, 4);
    return GEM_REQ_MSG_LEN;
}

int gem_wire_encode_recall(uint8_t *buf, const char *name, int32_t req_id, uint64_t bytes)
{
    int off = put_head(buf, name, req_id, GEM_REQ_RECALL);
    if (off < 0)
        return -1;
    memcpy(buf + off, &bytes, 8);
    return GEM_REQ_MSG_LEN;
}

int32_t gem_wire_rsp_id(const uint8_t *buf)
{
    int32_t v;
    memcpy(&v, buf, 4);
    return v;
}

int32_t gem_wire_rsp_status(const uint8_t *buf)
{
    int32_t v;
    memcpy(&v, buf + GEM_RSP_STATUS_OFFSET, 4);
    return v;
}

double gem_wire_rsp_quota_ms(const uint8_t *buf)
{
    double v;
    memcpy(&v, buf + 4, 8);
    return v;
}

uint32_t gem_wire_rsp_quota_flags(const uint8_t *buf)
{
    uint32_t v;
    memcpy(&v, buf + 12, 4);
    return v;
}

uint32_t gem_wire_rsp_quota_sharers(const uint8_t *buf)
{
    uint32_t v;
    memcpy(&v, buf + 16, 4);
    return v;
}

double gem_wire_rsp_quota_sent_at(const uint8_t *buf)
{
    double v;
    memcpy(&v, buf + 20, 8);
    return v;
}

int32_t gem_wire_rsp_verdict(const uint8_t *buf)
{
    int32_t v;
    memcpy(&v, buf + 4, 4);
    return v;
}

void gem_wire_rsp_mem_limit(const uint8_t *buf, uint64_t *used, uint64_t *limit)
{
    memcpy(used, buf + 4, 8);
    memcpy(limit, buf + 12, 8);
}

uint64_t gem_wire_rsp_mem_flags(const uint8_t *buf)
{
    uint64_t flags;
    memcpy(&flags, buf + 20, 8);
    return flags;
}

void gem_wire_rsp_process(const uint8_t *buf, int32_t *count, int32_t *pid, uint64_t *bytes)
{
    memcpy(count, buf + 4, 4);
    memcpy(pid, buf + 8, 4);
    memcpy(bytes, buf + 12, 8);
}

uint64_t gem_wire_rsp_recall_bytes(const uint8_t *buf)
{
    uint64_t bytes;
    memcpy(&bytes, buf + 4, 8);
    return bytes;
}
