/* xz decompression for MiniDebugInfo (.gnu_debugdata) through liblzma, opened with dlopen on
 * first use so that ranktop neither needs liblzma to build nor fails without it: every Debian
 * system has liblzma.so.5 (dpkg needs it), and without it stripped objects keep their
 * .dynsym names only.
 *
 * Invariants: the decoder's memory and output are bounded (XZ_MEMLIMIT, XZ_OUT_MAX); input
 * comes from files and is untrusted. Any thread; the library handle is resolved once. */
#include "native_priv.h"

#include "ranktop/base/util.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

#define XZ_MEMLIMIT (256ull << 20)
#define XZ_OUT_MAX ((size_t)64 << 20) /* MiniDebugInfo decodes to a few MiB */
#define LZMA_OK 0
#define LZMA_BUF_ERROR 10

/* lzma_stream_buffer_decode, as liblzma 5 declares it (lzma/container.h). */
typedef int (*buffer_decode_fn)(uint64_t *memlimit, uint32_t flags, const void *allocator,
                                const uint8_t *in, size_t *in_pos, size_t in_size, uint8_t *out,
                                size_t *out_pos, size_t out_size);

static buffer_decode_fn decode_fn;
static pthread_once_t decode_once = PTHREAD_ONCE_INIT;

static void load_lzma(void)
{
    void *lib = dlopen("liblzma.so.5", RTLD_LAZY | RTLD_LOCAL);

    if (lib)
        *(void **)&decode_fn = dlsym(lib, "lzma_stream_buffer_decode");
}

bool native_xz_decode(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen)
{
    size_t cap = n * 4 > 65536 ? n * 4 : 65536;

    pthread_once(&decode_once, load_lzma);
    if (!decode_fn)
        return false;
    /* The output size is not in the stream header: grow until it fits, within the cap. */
    while (cap <= XZ_OUT_MAX) {
        uint64_t mem = XZ_MEMLIMIT;
        size_t in_pos = 0, out_pos = 0;
        uint8_t *buf = x_malloc(cap);
        int rc = decode_fn(&mem, 0, NULL, in, &in_pos, n, buf, &out_pos, cap);

        if (rc == LZMA_OK) {
            *out = buf;
            *outlen = out_pos;
            return true;
        }
        free(buf);
        if (rc != LZMA_BUF_ERROR)
            return false;
        cap *= 2;
    }
    return false;
}
