/* Private to collectors/native: the context a native_open returns, and the symbolizer the
 * unwinder hands its frames to once the thread runs again. */
#ifndef RANKTOP_NATIVE_PRIV_H
#define RANKTOP_NATIVE_PRIV_H

#include "ranktop/native/native.h"

#include <libunwind.h>

struct native_syms;
struct arch_regs;
struct procmaps;

/* Where the unwinder reads a thread's memory and finds unwind tables: the live process
 * (process_vm_readv, the objects its maps name) or a recorded state such as a core file.
 * read returns the bytes read at addr (short where the memory ends, 0 for none); ehframe says
 * where the object that ip falls in keeps its .eh_frame_hdr in that memory and its text
 * range (false: none known). */
struct native_mem {
    size_t (*read)(void *src, uint64_t addr, void *buf, size_t len);
    bool (*ehframe)(void *src, uint64_t ip, uint64_t *hdr, uint64_t *start, uint64_t *end);
    void *src;
};

struct native_ctx {
    int pid;
    unw_addr_space_t as;
    unw_accessors_t acc;
    struct native_mem live; /* this process's memory, for the accessors */
    uint8_t *stack;         /* the stack copy of the thread being unwound */
    struct native_syms *syms;
    int *pending; /* seized threads that did not stop in time: released when they do */
    size_t npending;
};

/* Symbols of pid's mapped objects, loaded the first time an address falls in each one. */
int native_syms_open(int pid, struct native_syms **out, struct app_err *err);
void native_syms_close(struct native_syms *s);
/* Symbols over recorded maps (a core's): pid 0, each map's path the local file to read (or
 * not starting with '/' when there is none); maps are taken over. */
struct native_syms *native_syms_open_maps(struct procmaps *maps);

/* The notes gathered since the last call, one line each (see native_take_notes); NULL when
 * none. The caller frees them. */
char *native_syms_take_notes(struct native_syms *s);

/* Decompresses an xz stream (.gnu_debugdata) with liblzma, loaded on first use; false when
 * this system has no liblzma or the data is not a valid stream of at most 64 MiB. *out is
 * the caller's to free. */
bool native_xz_decode(const uint8_t *in, size_t n, uint8_t **out, size_t *outlen);

/* Where the object that ip falls in keeps its .eh_frame_hdr in the target (*hdr) and its text
 * range, from its program headers read through /proc/PID/root: the unwinder's
 * find_proc_info reads the table itself from the target's memory. false when ip is in no
 * file mapping, or the object has no PT_GNU_EH_FRAME (then libunwind looks by itself). */
bool native_syms_ehframe(struct native_syms *s, uint64_t ip, uint64_t *hdr, uint64_t *start,
                         uint64_t *end);

/* Whether ip falls in a mapping of a file (of the maps last read). */
bool native_syms_in_file(struct native_syms *s, uint64_t ip);

/* Unwinds a recorded thread state (registers regs, memory mem) with the accessors and
 * table search of the live unwinder, into out's ips (innermost first; no names). */
void native_walk_mem(const struct native_mem *mem, const struct arch_regs *regs,
                     struct native_stack *out);

/* Fills function, object, offset, eval and interp of every frame. */
void native_symbolize(struct native_syms *s, struct native_stack *st);

#endif
