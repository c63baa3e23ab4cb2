/* The monitor's achieved sampling rate, measured over a window of recent pass counts.
 *
 * The engine's own figure (passes since the start over the time since the start) is bogus
 * at first: one pass 20 ms after the start reads as 50 Hz. Here the UI feeds the pass counter
 * it copies on each refresh, and the rate is the passes between the newest point and the
 * newest point at least a window older, over the time between them: nothing (NaN) until the
 * points span a full window. Pure: no I/O, no lock; the caller owns the struct. */
#include "ranktop/views/view.h"

#include <math.h>

void view_rate_add(struct view_rate *r, uint64_t now, uint64_t passes)
{
    size_t at = (r->first + r->n) % VIEW_RATE_POINTS;

    if (r->n && (now < r->t[(at + VIEW_RATE_POINTS - 1) % VIEW_RATE_POINTS] ||
                 passes < r->passes[(at + VIEW_RATE_POINTS - 1) % VIEW_RATE_POINTS]))
        r->n = 0; /* time or counter went back: start over rather than guess */
    if (r->n == VIEW_RATE_POINTS) {
        at = r->first;
        r->first = (r->first + 1) % VIEW_RATE_POINTS;
        r->n--;
    }
    r->t[at] = now;
    r->passes[at] = passes;
    r->n++;
}

uint64_t view_rate_window(double rate_hz)
{
    double ns = rate_hz > 0 ? VIEW_RATE_PERIODS * 1e9 / rate_hz : 0;

    if (ns < VIEW_RATE_MIN_NS)
        ns = VIEW_RATE_MIN_NS;
    return ns > VIEW_RATE_MAX_NS ? VIEW_RATE_MAX_NS : (uint64_t)ns;
}

double view_rate_hz(const struct view_rate *r, uint64_t window_ns)
{
    size_t newest;

    if (r->n < 2)
        return NAN;
    newest = (r->first + r->n - 1) % VIEW_RATE_POINTS;
    /* From the newest back: the first point at least a window older than the newest. */
    for (size_t k = r->n - 1; k-- > 0;) {
        size_t i = (r->first + k) % VIEW_RATE_POINTS;
        uint64_t span = r->t[newest] - r->t[i];

        if (span >= window_ns && span > 0)
            return (double)(r->passes[newest] - r->passes[i]) * 1e9 / (double)span;
    }
    return NAN;
}
