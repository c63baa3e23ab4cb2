/* ELF facts the Python reader needs from an interpreter binary or libpython: its type, load
 * base, the _PyRuntime / Py_Version / PyCode_Type symbols, the .PyRuntime section, and a
 * version string found in its read-only data. */
#ifndef RANKTOP_ELFSYM_H
#define RANKTOP_ELFSYM_H

#if defined(RANKTOP_LAYER_BUILD) && !defined(RANKTOP_SEES_PROC)
#error "ranktop/proc/elfsym.h belongs to collectors/proc/, a layer this one may not use"
#endif

#include <stddef.h>
#include <stdint.h>

#include "ranktop/base/status.h"

struct elf_info {
    int type;                    /* ET_EXEC or ET_DYN */
    uint64_t load_vaddr;         /* first PT_LOAD p_vaddr rounded down to its alignment */
    uint64_t pyruntime;          /* st_value of _PyRuntime, 0 if absent */
    uint64_t pyruntime_size;     /* st_size of _PyRuntime */
    uint64_t pyruntime_sec;      /* sh_addr of .PyRuntime, 0 if absent */
    uint64_t asyncio_debug;      /* sh_addr of .AsyncioDebug (3.14+ _asyncio), 0 if absent */
    uint64_t py_version;         /* st_value of Py_Version (3.11+), 0 if absent */
    uint64_t pycode_type;        /* st_value of PyCode_Type, 0 if absent */
    uint64_t bss_addr, bss_size; /* .bss, where Py_GetVersion() keeps sys.version */
    char version[24];            /* "3.9.18" from .rodata, "" if not found or Py_Version is */
};

/* Parses an ELF image held in memory. Pure: bounded by len, no I/O. Returns 0, APP_E_PARSE for
 * a malformed file, or APP_E_ARCH, saying what it is ("a 32-bit program for x86: ..."), for
 * anything but a 64-bit little-endian object of this build's machine (x86-64 or aarch64). */
int elf_parse(const uint8_t *buf, size_t len, struct elf_info *out, struct app_err *err);

/* Maps root + path read-only (tfile_map: a regular file, never waited on; root NULL or a
 * directory such as /proc/PID/root that path is resolved inside) and parses it. */
int elf_inspect_file(const char *root, const char *path, struct elf_info *out, struct app_err *err);

#endif
