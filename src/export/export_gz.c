/* gzip output for export_write (an output name ending in ".gz"): a stdio stream whose bytes
 * are deflated with zlib into gzip format (RFC 1952: header, deflate, CRC-32 and size) and
 * written to a file descriptor, so every exporter writes through the same FILE as always.
 *
 * Closing the stream finishes the gzip member, fsyncs and closes the descriptor: the caller
 * renames the file only after a clean close. A write error is kept and reported by every
 * later write and by the close. Runs on the thread that writes the stream. */
#include "export_priv.h"

#include "ranktop/base/util.h"

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

/* Level 1: autosave rewrites the whole file every time. On a 92 MB Chrome trace, level 1
 * gives 4.7 MB in 2.7 s, the default level 6 gives 3.8 MB in 4.4 s (README, Performance). */
#define GZ_LEVEL 1
#define GZ_OUT (256u << 10)

struct gz {
    z_stream z;
    int fd;
    int err; /* first errno */
    unsigned char out[GZ_OUT];
};

/* Writes out[0..n) to the descriptor whole; returns 0 or an errno value. */
static int write_all(int fd, const unsigned char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);

        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0)
            return k < 0 ? errno : EIO;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Feeds the pending input to deflate with `flush` until it has taken all of it (and, for
 * Z_FINISH, written the trailer), draining the output to the descriptor. */
static int gz_pump(struct gz *g, int flush)
{
    int zr;

    do {
        g->z.next_out = g->out;
        g->z.avail_out = sizeof(g->out);
        zr = deflate(&g->z, flush);
        if (zr == Z_STREAM_ERROR)
            return EIO;
        if (sizeof(g->out) - g->z.avail_out) {
            int e = write_all(g->fd, g->out, sizeof(g->out) - g->z.avail_out);

            if (e)
                return e;
        }
    } while (g->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
    return 0;
}

static ssize_t gz_write(void *cookie, const char *buf, size_t n)
{
    struct gz *g = cookie;

    if (g->err) {
        errno = g->err;
        return 0;
    }
    g->z.next_in = (Bytef *)(uintptr_t)buf;
    g->z.avail_in = (uInt)n; /* stdio hands over at most its buffer, far below 4 GiB */
    g->err = gz_pump(g, Z_NO_FLUSH);
    if (g->err) {
        errno = g->err;
        return 0;
    }
    return (ssize_t)n;
}

static int gz_close(void *cookie)
{
    struct gz *g = cookie;
    int e = g->err;

    g->z.next_in = NULL;
    g->z.avail_in = 0;
    if (!e)
        e = gz_pump(g, Z_FINISH);
    deflateEnd(&g->z);
    if (!e && fsync(g->fd))
        e = errno;
    if (close(g->fd) && !e)
        e = errno;
    free(g);
    if (e) {
        errno = e;
        return -1;
    }
    return 0;
}

FILE *xgz_fdopen(int fd)
{
    static const cookie_io_functions_t io = {.write = gz_write, .close = gz_close};
    struct gz *g = x_calloc(1, sizeof(*g));
    FILE *f;

    g->fd = fd;
    /* windowBits 15 + 16: a gzip header and trailer around the deflate stream. */
    if (deflateInit2(&g->z, GZ_LEVEL, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        free(g);
        errno = ENOMEM;
        return NULL;
    }
    f = fopencookie(g, "w", io);
    if (!f) {
        deflateEnd(&g->z);
        free(g);
        return NULL;
    }
    return f;
}
