/* The union of time spans on one clock: see gemini/spans.h. */
#include "gemini/spans.h"

#include <string.h>

_Static_assert(sizeof(((struct gem_spans *)0)->lo) / sizeof(double) == GEM_SPANS_MAX,
               "gem_spans holds GEM_SPANS_MAX spans");

void gem_spans_clear(struct gem_spans *s)
{
    s->n = 0;
}

/* Remove span i (the ones after it move down). */
static void drop(struct gem_spans *s, int i)
{
    memmove(&s->lo[i], &s->lo[i + 1], (size_t)(s->n - i - 1) * sizeof(double));
    memmove(&s->hi[i], &s->hi[i + 1], (size_t)(s->n - i - 1) * sizeof(double));
    s->n--;
}

/* Full: join the two neighbours with the shortest gap between them. */
static void join_closest(struct gem_spans *s)
{
    int best = 0;
    for (int i = 1; i + 1 < s->n; i++)
        if (s->lo[i + 1] - s->hi[i] < s->lo[best + 1] - s->hi[best])
            best = i;
    s->hi[best] = s->hi[best + 1];
    drop(s, best + 1);
}

void gem_spans_add(struct gem_spans *s, double lo, double hi)
{
    if (!(hi >= lo)) /* (false for NaN too) */
        return;
    int i = 0; /* the first span that ends at or after lo */
    while (i < s->n && s->hi[i] < lo)
        i++;
    if (i < s->n && s->lo[i] <= hi) { /* touches span i: grow it, then swallow the next ones */
        if (lo < s->lo[i])
            s->lo[i] = lo;
        if (hi > s->hi[i])
            s->hi[i] = hi;
        while (i + 1 < s->n && s->lo[i + 1] <= s->hi[i]) {
            if (s->hi[i + 1] > s->hi[i])
                s->hi[i] = s->hi[i + 1];
            drop(s, i + 1);
        }
        return;
    }
    if (s->n == GEM_SPANS_MAX) {
        join_closest(s);
        gem_spans_add(s, lo, hi); /* (once: there is room now) */
        return;
    }
    memmove(&s->lo[i + 1], &s->lo[i], (size_t)(s->n - i) * sizeof(double));
    memmove(&s->hi[i + 1], &s->hi[i], (size_t)(s->n - i) * sizeof(double));
    s->lo[i] = lo;
    s->hi[i] = hi;
    s->n++;
}

double gem_spans_total(const struct gem_spans *s)
{
    double total = 0.0;
    for (int i = 0; i < s->n; i++)
        total += s->hi[i] - s->lo[i];
    return total;
}
