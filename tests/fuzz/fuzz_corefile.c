/* libFuzzer entry point for the core parser (collectors/proc/corefile.c): the input is a list
 * of edits to the small core of tests/unit/core_synth.h, so that every input is a core that is
 * nearly right (headers, notes and segments where a reader looks), not random bytes that fail
 * the ELF magic. Its first two bytes are the length the core is cut to; then each three bytes
 * are an offset (two bytes, taken modulo the core's size) and the byte written there. The
 * headers are parsed, then every note segment that lies within the cut core; what is accepted
 * must keep its counts within bounds and its segments within the file, else abort(), which
 * libFuzzer reports as a crash (as it does any out-of-bounds access under ASan). */
#include "ranktop/proc/corefile.h"
#include "../unit/core_synth.h"

#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(const struct core_info *ci, size_t len)
{
    if (ci->nthreads > CORE_MAX_THREADS || ci->nmaps > CORE_MAX_MAPS)
        abort();
    for (size_t i = 0; i < ci->nsegs; i++)
        if (ci->segs[i].offset > len || ci->segs[i].filesz > len - ci->segs[i].offset ||
            ci->segs[i].filesz > ci->segs[i].memsz)
            abort();
    for (size_t i = 0; i < ci->nmaps; i++)
        if (ci->maps[i].end <= ci->maps[i].start || strlen(ci->maps[i].path) > len)
            abort();
    if (strlen(ci->psargs) >= sizeof(ci->psargs) || strlen(ci->fname) >= sizeof(ci->fname))
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static uint8_t core[SYN_SIZE];
    struct core_info ci;
    struct app_err err = {0};
    size_t len = SYN_SIZE;

    syn_core(core, "/fuzz/prog");
    if (size >= 2) {
        len = (size_t)(data[0] | data[1] << 8) % (SYN_SIZE + 1);
        data += 2;
        size -= 2;
        if (len == 0)
            len = SYN_SIZE;
    }
    for (; size >= 3; data += 3, size -= 3)
        core[(size_t)(data[0] | data[1] << 8) % SYN_SIZE] = data[2];
    if (core_parse_head(core, len, len, &ci, &err) == 0) {
        for (size_t i = 0; i < ci.nnotes; i++)
            if (core_parse_notes(core + ci.notes_off[i], (size_t)ci.notes_len[i], &ci, &err) < 0)
                break;
        check(&ci, len);
    } else if (!err.msg[0]) {
        abort();
    }
    core_info_fini(&ci);
    return 0;
}
