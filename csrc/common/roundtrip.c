/* A token request's round trip and the early ask it needs; see roundtrip.h.  Pure. */
#include "gemini/roundtrip.h"

void gem_roundtrip_sample(struct gem_roundtrip *r, int64_t rtt_ns)
{
    if (rtt_ns <= 0)
        return;
    if (r->smoothed_ns == 0) { /* RFC 6298 2.2 */
        r->smoothed_ns = rtt_ns;
        r->deviation_ns = rtt_ns / 2;
        return;
    }
    int64_t off = rtt_ns - r->smoothed_ns;
    r->deviation_ns += ((off < 0 ? -off : off) - r->deviation_ns) / 4; /* RFC 6298 2.3 */
    r->smoothed_ns += off / 8;
}

int64_t gem_roundtrip_early(const struct gem_roundtrip *r, int64_t tail_ns, int64_t floor_ns,
                            int64_t max_ns)
{
    if (r->smoothed_ns == 0)
        return floor_ns;
    int64_t early = r->smoothed_ns + 4 * r->deviation_ns - tail_ns;
    if (early > max_ns)
        early = max_ns;
    return early > floor_ns ? early : floor_ns;
}

int64_t gem_roundtrip_hop_ns(int64_t received_ns, double sent_at_s)
{
    /* (In doubles, checked before any conversion: a garbage double cast to int64_t is
     * undefined.) */
    double hop_s = (double)received_ns / 1e9 - sent_at_s;
    if (!(sent_at_s > 0.0) || !(hop_s >= 0.0 && hop_s <= GEM_HOP_PLAUSIBLE_NS / 1e9))
        return -1;
    return (int64_t)(hop_s * 1e9);
}

int64_t gem_roundtrip_late_ns(int64_t hop_ns, int64_t quota_ns)
{
    if (hop_ns < 0 || hop_ns > GEM_HOP_PLAUSIBLE_NS || quota_ns <= 0)
        return 0;
    int64_t late = hop_ns - GEM_HOP_ALLOWANCE_NS;
    if (late > quota_ns / 2)
        late = quota_ns / 2;
    return late > 0 ? late : 0;
}
