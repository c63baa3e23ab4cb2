/* ELF core files: what `ranktop dump --core` reads instead of a live process.
 *
 * Owns the parsing of a core's ELF header, program headers and notes (core_parse_head and
 * core_parse_notes: pure, every count, offset and string checked against the buffer before
 * use, so a truncated or hostile core is an APP_E_PARSE with a line saying what is wrong,
 * never a crash or an unbounded read), and the loader (corefile_open) that reads those parts
 * of the file (at most CORE_NOTES_MAX bytes of notes) and opens the files the NT_FILE note
 * names: at --lib-search DIR first, by base name, then where the core says. A file whose first
 * bytes differ from the core's copy of them (the kernel dumps the first page of every mapped
 * ELF object) is another build and is not used. Memory is then an rmem image (corefile_mem):
 * the core's segments, and for the read-only file-backed parts the core left out (a program's
 * text: a segment without bytes in a kernel's core, no segment at all in gdb's), the files'
 * bytes, all read with pread, so a file that shrinks meanwhile gives a
 * short read, never SIGBUS. Nothing is ever written. One thread at a time per corefile. */
#include "ranktop/proc/corefile.h"
#include "ranktop/proc/tfile.h"

#include "ranktop/base/bytes.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#define CORE_MACHINE EM_X86_64
#define CORE_MACHINE_NAME "x86-64"
#define CORE_MACHINE_NREGS 27
#elif defined(__aarch64__)
#define CORE_MACHINE EM_AARCH64
#define CORE_MACHINE_NAME "aarch64"
#define CORE_MACHINE_NREGS 34
#else
#error "collectors/proc/corefile.c: no ELF machine for this architecture"
#endif

#define PRSTATUS_PID 32 /* pr_pid in a 64-bit struct elf_prstatus */
#define PRSTATUS_CURSIG 12
#define PRSTATUS_REGS 112 /* pr_reg */
#define PRPSINFO_PID 24
#define PRPSINFO_FNAME 40
#define PRPSINFO_ARGS 56
#define PRPSINFO_SIZE 136
#define NT_FILE_ID 0x46494c45u
#define NT_SIGINFO_ID 0x53494749u
#define CORE_FILE_MAX (1ull << 40) /* a mapped file opened: any real object is smaller */
#define HEAD_MAX ((size_t)64 + (size_t)CORE_MAX_SEGS * sizeof(Elf64_Phdr))
#define CHECK_PAGE 4096 /* bytes of a file's start compared with the core's copy */

/* A parse error: says what is wrong and where. */
static int bad(struct app_err *err, const char *what, uint64_t at)
{
    return app_err_set(err, APP_E_PARSE, "malformed core: %s (at byte %llu)", what,
                       (unsigned long long)at);
}

static int check_ident(const uint8_t *buf, size_t len, struct app_err *err)
{
    if (len < sizeof(Elf64_Ehdr) || memcmp(buf, ELFMAG, SELFMAG) != 0)
        return app_err_set(err, APP_E_PARSE, "not an ELF file%s",
                           len < sizeof(Elf64_Ehdr) ? " (shorter than an ELF header)" : "");
    if (buf[EI_CLASS] != ELFCLASS64 || buf[EI_DATA] != ELFDATA2LSB)
        return app_err_set(err, APP_E_ARCH,
                           "a core of a 32-bit or big-endian program: this "
                           "build reads 64-bit " CORE_MACHINE_NAME " cores");
    if (bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_type)) != ET_CORE)
        return app_err_set(err, APP_E_PARSE, "an ELF file but not a core (e_type %u)",
                           bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_type)));
    if (bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_machine)) != CORE_MACHINE)
        return app_err_set(
            err, APP_E_ARCH,
            "a core of another machine (e_machine %u): this build reads " CORE_MACHINE_NAME
            " cores",
            bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_machine)));
    return 0;
}

static int add_seg(struct core_info *out, const Elf64_Phdr *ph, uint64_t file_size, uint64_t at,
                   struct app_err *err)
{
    if (ph->p_filesz > ph->p_memsz || ph->p_vaddr + ph->p_memsz < ph->p_vaddr)
        return bad(err, "a segment whose sizes do not fit", at);
    if (ph->p_offset > file_size || ph->p_filesz > file_size - ph->p_offset)
        return app_err_set(err, APP_E_PARSE,
                           "truncated core: a segment needs the file's bytes up to %llu, the file "
                           "has %llu",
                           (unsigned long long)(ph->p_offset + ph->p_filesz),
                           (unsigned long long)file_size);
    out->segs[out->nsegs++] =
        (struct core_seg){ph->p_vaddr, ph->p_memsz, ph->p_offset, ph->p_filesz, ph->p_flags};
    return 0;
}

int core_parse_head(const uint8_t *buf, size_t len, uint64_t file_size, struct core_info *out,
                    struct app_err *err)
{
    uint64_t phoff;
    unsigned phnum, phent;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = check_ident(buf, len, err)) < 0)
        return rc;
    phoff = bytes_load_u64(buf + offsetof(Elf64_Ehdr, e_phoff));
    phnum = bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_phnum));
    phent = bytes_load_u16(buf + offsetof(Elf64_Ehdr, e_phentsize));
    if (phnum == PN_XNUM)
        return app_err_set(err, APP_E_LIMIT, "a core with more than %u segments", CORE_MAX_SEGS);
    if (phent != sizeof(Elf64_Phdr) || phnum == 0)
        return bad(err, "no program headers, or of a wrong size", offsetof(Elf64_Ehdr, e_phoff));
    if (phoff > len || (uint64_t)phnum * phent > len - phoff)
        return app_err_set(err, APP_E_PARSE,
                           "truncated core: its program headers end at byte %llu, the file "
                           "has %llu",
                           (unsigned long long)(phoff + (uint64_t)phnum * phent),
                           (unsigned long long)(file_size < len ? file_size : len));
    out->segs = x_calloc(phnum, sizeof(*out->segs));
    for (unsigned i = 0; i < phnum; i++) {
        Elf64_Phdr ph;
        uint64_t at = phoff + (uint64_t)i * phent;

        memcpy(&ph, buf + at, sizeof(ph));
        if (ph.p_type == PT_LOAD && (rc = add_seg(out, &ph, file_size, at, err)) < 0)
            return rc;
        if (ph.p_type != PT_NOTE || out->nnotes >= 16)
            continue;
        if (ph.p_offset > file_size || ph.p_filesz > file_size - ph.p_offset)
            return app_err_set(
                err, APP_E_PARSE, "truncated core: its notes end at byte %llu, the file has %llu",
                (unsigned long long)(ph.p_offset + ph.p_filesz), (unsigned long long)file_size);
        out->notes_off[out->nnotes] = ph.p_offset;
        out->notes_len[out->nnotes++] = ph.p_filesz;
    }
    if (out->nnotes == 0)
        return app_err_set(err, APP_E_PARSE, "malformed core: it has no notes (no threads)");
    return 0;
}

/* A copy of the NUL-terminated or n-byte text at s (no longer than n). */
static void copy_text(char *dst, size_t cap, const uint8_t *s, size_t n)
{
    size_t k = 0;

    while (k < n && k + 1 < cap && s[k])
        k++;
    memcpy(dst, s, k);
    dst[k] = '\0';
}

static int note_prstatus(const uint8_t *d, size_t n, struct core_info *out, struct app_err *err)
{
    struct core_thread *t;

    if (n < PRSTATUS_REGS + CORE_MACHINE_NREGS * 8)
        return bad(err, "an NT_PRSTATUS note too short", 0);
    if (out->nthreads >= CORE_MAX_THREADS)
        return app_err_set(err, APP_E_LIMIT, "a core with more than %u threads", CORE_MAX_THREADS);
    if (out->nthreads % 64 == 0)
        out->threads = x_reallocarray(out->threads, out->nthreads + 64, sizeof(*out->threads));
    t = &out->threads[out->nthreads++];
    memset(t, 0, sizeof(*t));
    t->tid = bytes_load_i32(d + PRSTATUS_PID);
    t->cursig = bytes_load_u16(d + PRSTATUS_CURSIG);
    t->nregs = CORE_MACHINE_NREGS;
    for (unsigned i = 0; i < t->nregs; i++)
        t->regs[i] = bytes_load_u64(d + PRSTATUS_REGS + 8 * i);
    return 0;
}

static void note_prpsinfo(const uint8_t *d, size_t n, struct core_info *out)
{
    if (n < PRPSINFO_SIZE)
        return;
    out->pid = bytes_load_i32(d + PRPSINFO_PID);
    copy_text(out->fname, sizeof(out->fname), d + PRPSINFO_FNAME, 16);
    copy_text(out->psargs, sizeof(out->psargs), d + PRPSINFO_ARGS, 80);
}

static void note_auxv(const uint8_t *d, size_t n, struct core_info *out)
{
    for (size_t i = 0; i + 16 <= n; i += 16)
        if (bytes_load_u64(d + i) == AT_PHDR)
            out->at_phdr = bytes_load_u64(d + i + 8);
}

/* NT_FILE: count, page size, count (start, end, page offset) triples, then count paths. */
static int note_file(const uint8_t *d, size_t n, struct core_info *out, struct app_err *err)
{
    uint64_t count, page;
    const uint8_t *s, *end = d + n;

    if (out->maps || n < 16)
        return bad(err, n < 16 ? "an NT_FILE note too short" : "a second NT_FILE note", 0);
    count = bytes_load_u64(d);
    page = bytes_load_u64(d + 8);
    if (count > CORE_MAX_MAPS || count * 24 > n - 16)
        return bad(err, "an NT_FILE note with more files than bytes", 0);
    if (page == 0 || page > (1u << 30) || (page & (page - 1)))
        return bad(err, "an NT_FILE note with a bad page size", 0);
    out->maps = x_calloc(count ? count : 1, sizeof(*out->maps));
    s = d + 16 + count * 24;
    for (uint64_t i = 0; i < count; i++) {
        const uint8_t *z = memchr(s, 0, (size_t)(end - s));
        struct core_map *m = &out->maps[out->nmaps];
        uint64_t pgoff = bytes_load_u64(d + 16 + i * 24 + 16);

        if (!z)
            return bad(err, "an NT_FILE path without its end", 0);
        m->start = bytes_load_u64(d + 16 + i * 24);
        m->end = bytes_load_u64(d + 16 + i * 24 + 8);
        if (m->end <= m->start || pgoff > UINT64_MAX / page)
            return bad(err, "an NT_FILE range that is empty or out of bounds", 0);
        m->offset = pgoff * page;
        m->path = x_strndup((const char *)s, (size_t)(z - s));
        out->nmaps++;
        s = z + 1;
    }
    return 0;
}

static int one_note(uint32_t type, const uint8_t *name, uint32_t namesz, const uint8_t *d, size_t n,
                    struct core_info *out, struct app_err *err)
{
    if (namesz != 5 || memcmp(name, "CORE", 5) != 0)
        return 0; /* "LINUX" notes (extra registers) and others: not needed */
    switch (type) {
    case NT_PRSTATUS:
        return note_prstatus(d, n, out, err);
    case NT_PRPSINFO:
        note_prpsinfo(d, n, out);
        return 0;
    case NT_AUXV:
        note_auxv(d, n, out);
        return 0;
    case NT_FILE_ID:
        return note_file(d, n, out, err);
    case NT_SIGINFO_ID:
        if (n >= 4)
            out->signo = bytes_load_i32(d);
        return 0;
    default:
        return 0;
    }
}

static uint64_t pad4(uint64_t v)
{
    return (v + 3) & ~(uint64_t)3;
}

int core_parse_notes(const uint8_t *buf, size_t len, struct core_info *out, struct app_err *err)
{
    size_t at = 0;

    while (len - at >= 12) {
        uint32_t namesz = bytes_load_u32(buf + at), descsz = bytes_load_u32(buf + at + 4);
        uint32_t type = bytes_load_u32(buf + at + 8);
        uint64_t name_at = at + 12, desc_at = name_at + pad4(namesz);
        int rc;

        if (desc_at > len || descsz > len - desc_at)
            return bad(err, "a note that runs past its segment", at);
        rc = one_note(type, buf + name_at, namesz, buf + desc_at, descsz, out, err);
        if (rc < 0)
            return rc;
        if (pad4(desc_at + descsz) >= len)
            break;
        at = (size_t)pad4(desc_at + descsz);
    }
    if (!out->signo && out->nthreads)
        out->signo = out->threads[0].cursig;
    return 0;
}

void core_info_fini(struct core_info *ci)
{
    for (size_t i = 0; i < ci->nmaps; i++)
        free(ci->maps[i].path);
    free(ci->maps);
    free(ci->segs);
    free(ci->threads);
    memset(ci, 0, sizeof(*ci));
}

/* pread of exactly n bytes, or -1. */
static int read_at(int fd, uint64_t off, void *buf, size_t n)
{
    size_t done = 0;

    while (done < n) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, n - done, (off_t)(off + done));

        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int load_head(struct corefile *c, struct app_err *err)
{
    uint8_t eh[sizeof(Elf64_Ehdr)];
    size_t len = c->size < sizeof(eh) ? (size_t)c->size : sizeof(eh);
    uint64_t need;
    uint8_t *buf;
    int rc;

    if (read_at(c->fd, 0, eh, len) < 0)
        return app_err_set(err, APP_E_IO, "cannot read %s", c->path);
    if ((rc = check_ident(eh, len, err)) < 0)
        return rc;
    need = bytes_load_u64(eh + offsetof(Elf64_Ehdr, e_phoff)) +
           (uint64_t)bytes_load_u16(eh + offsetof(Elf64_Ehdr, e_phnum)) * sizeof(Elf64_Phdr);
    if (need > HEAD_MAX || need < sizeof(eh))
        return bad(err, "program headers out of bounds", offsetof(Elf64_Ehdr, e_phoff));
    len = need < c->size ? (size_t)need : (size_t)c->size;
    buf = x_malloc(len);
    rc = read_at(c->fd, 0, buf, len) < 0 ? app_err_set(err, APP_E_IO, "cannot read %s", c->path)
                                         : core_parse_head(buf, len, c->size, &c->info, err);
    free(buf);
    return rc;
}

static int load_notes(struct corefile *c, struct app_err *err)
{
    uint64_t total = 0;
    int rc = 0;

    for (size_t i = 0; i < c->info.nnotes && rc == 0; i++) {
        size_t n = (size_t)c->info.notes_len[i];
        uint8_t *buf;

        total += n;
        if (total > CORE_NOTES_MAX)
            return app_err_set(err, APP_E_LIMIT, "a core with more than %u MiB of notes",
                               CORE_NOTES_MAX >> 20);
        buf = x_malloc(n ? n : 1);
        rc = read_at(c->fd, c->info.notes_off[i], buf, n) < 0
                 ? app_err_set(err, APP_E_IO, "cannot read %s", c->path)
                 : core_parse_notes(buf, n, &c->info, err);
        free(buf);
    }
    if (rc == 0 && c->info.nthreads == 0)
        return app_err_set(err, APP_E_PARSE, "malformed core: no thread (NT_PRSTATUS) in it");
    return rc;
}

long corefile_map_at(const struct corefile *c, uint64_t addr)
{
    for (size_t i = 0; i < c->info.nmaps; i++)
        if (addr >= c->info.maps[i].start && addr < c->info.maps[i].end)
            return (long)i;
    return -1;
}

/* The segment holding addr with bytes in the core, or NULL. */
static const struct core_seg *dumped_at(const struct corefile *c, uint64_t addr)
{
    for (size_t i = 0; i < c->info.nsegs; i++) {
        const struct core_seg *s = &c->info.segs[i];

        if (addr >= s->vaddr && addr - s->vaddr < s->filesz)
            return s;
    }
    return NULL;
}

/* Whether the file at fd starts as the core's copy of map m's first bytes (or the core holds
 * none to compare with). */
static bool same_start(const struct corefile *c, const struct core_map *m, int fd)
{
    const struct core_seg *s = m->offset == 0 ? dumped_at(c, m->start) : NULL;
    uint8_t a[CHECK_PAGE], b[CHECK_PAGE];
    size_t n;

    if (!s)
        return true;
    n = s->filesz - (m->start - s->vaddr);
    n = n < CHECK_PAGE ? n : CHECK_PAGE;
    if (n > m->end - m->start)
        n = (size_t)(m->end - m->start);
    return read_at(c->fd, s->offset + (m->start - s->vaddr), a, n) == 0 &&
           read_at(fd, 0, b, n) == 0 && memcmp(a, b, n) == 0;
}

/* Opens a candidate file for map i; true when taken. */
static bool try_file(struct corefile *c, size_t i, const char *path, char *why, size_t nwhy)
{
    struct app_err e = {0};
    uint64_t size = 0;
    int fd = tfile_open(NULL, path, 0, CORE_FILE_MAX, &size, &e);

    if (fd < 0)
        return false;
    if (!same_start(c, &c->info.maps[i], fd)) {
        if (!why[0])
            snprintf(why, nwhy, "%s is not the file the core mapped (its first bytes differ)",
                     path);
        close(fd);
        return false;
    }
    c->map_fd[i] = fd;
    c->map_local[i] = x_strdup(path);
    c->map_len[i] = size;
    return true;
}

static void open_map(struct corefile *c, size_t i, const struct core_opts *o, char *why,
                     size_t nwhy)
{
    const char *rec = c->info.maps[i].path, *base = strrchr(rec, '/');
    char buf[PATH_MAX];

    c->map_fd[i] = -1;
    if (rec[0] != '/')
        return;
    if (o->exe && c->exe_map >= 0 && !strcmp(rec, c->info.maps[c->exe_map].path)) {
        try_file(c, i, o->exe, why, nwhy);
        return;
    }
    base = base ? base + 1 : rec;
    if (o->lib_search &&
        snprintf(buf, sizeof(buf), "%s/%s", o->lib_search, base) < (int)sizeof(buf) &&
        try_file(c, i, buf, why, nwhy))
        return;
    try_file(c, i, rec, why, nwhy);
}

struct byname {
    const char *path;
    size_t i;
};

static int byname_cmp(const void *a, const void *b)
{
    const struct byname *x = a, *y = b;
    int d = strcmp(x->path, y->path);

    return d ? d : x->i < y->i ? -1 : x->i > y->i;
}

/* Opens each mapped file once: the maps of one file (an object has several) are grouped by a
 * sort, not compared pairwise (a hostile core may name a million maps), and share the first
 * one's descriptor (a dup each could run out of descriptors). */
static void open_maps(struct corefile *c, const struct core_opts *o)
{
    char why[PATH_MAX + 96] = "";
    size_t n = c->info.nmaps ? c->info.nmaps : 1;
    struct byname *v = x_calloc(n, sizeof(*v));

    c->map_fd = x_calloc(n, sizeof(*c->map_fd));
    c->map_local = x_calloc(n, sizeof(*c->map_local));
    c->map_len = x_calloc(n, sizeof(*c->map_len));
    c->map_same = x_calloc(n, sizeof(*c->map_same));
    c->exe_map = c->info.at_phdr ? corefile_map_at(c, c->info.at_phdr) : -1;
    if (c->exe_map < 0 && c->info.nmaps)
        c->exe_map = 0; /* the kernel lists mappings by address: the program's come first */
    for (size_t i = 0; i < c->info.nmaps; i++)
        v[i] = (struct byname){c->info.maps[i].path, i};
    qsort(v, c->info.nmaps, sizeof(*v), byname_cmp);
    for (size_t k = 0; k < c->info.nmaps; k++) {
        size_t i = v[k].i;

        c->map_same[i] = -1;
        if (k > 0 && !strcmp(v[k - 1].path, v[k].path)) {
            size_t first =
                c->map_same[v[k - 1].i] >= 0 ? (size_t)c->map_same[v[k - 1].i] : v[k - 1].i;

            c->map_same[i] = (long)first;
            c->map_fd[i] = c->map_fd[first];
            c->map_local[i] = c->map_local[first];
            c->map_len[i] = c->map_len[first];
            continue;
        }
        open_map(c, i, o, why, sizeof(why));
    }
    free(v);
    if (why[0])
        c->note = x_strdup(why);
}

int corefile_open(const char *path, const struct core_opts *o, struct corefile **out,
                  struct app_err *err)
{
    static const struct core_opts none = {0};
    struct corefile *c = x_calloc(1, sizeof(*c));
    int rc;

    *out = NULL;
    c->path = x_strdup(path);
    c->fd = tfile_open(NULL, path, 0, UINT64_MAX, &c->size, err);
    if (c->fd < 0) {
        rc = c->fd;
        corefile_free(c);
        return rc;
    }
    rc = load_head(c, err);
    if (rc == 0)
        rc = load_notes(c, err);
    if (rc < 0) {
        corefile_free(c);
        return rc;
    }
    open_maps(c, o ? o : &none);
    *out = c;
    return 0;
}

/* The bytes [a, b) of map i, from its file (clipped to the file's length). */
static void add_part(const struct corefile *c, struct rmem *m, size_t i, uint64_t a, uint64_t b)
{
    const struct core_map *f = &c->info.maps[i];
    uint64_t off = f->offset + (a - f->start);

    if (a >= b || c->map_fd[i] < 0 || off >= c->map_len[i] || off + (b - a) < off)
        return;
    if (b - a > c->map_len[i] - off) /* a mapping past the file's end has no bytes */
        b = a + (c->map_len[i] - off);
    rmem_image_add_file(m, a, c->map_fd[i], off, (size_t)(b - a));
}

/* The read-only bytes [lo, hi) of a segment the core left out, from the mapped files. */
static void add_from_files(const struct corefile *c, struct rmem *m, uint64_t lo, uint64_t hi)
{
    for (size_t i = 0; i < c->info.nmaps; i++) {
        const struct core_map *f = &c->info.maps[i];

        add_part(c, m, i, lo > f->start ? lo : f->start, hi < f->end ? hi : f->end);
    }
}

static int seg_cmp(const void *a, const void *b)
{
    const struct core_seg *x = a, *y = b;

    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

/* The parts of each mapped file that no segment covers: gdb's gcore writes no segment at all
 * for a mapping it holds unchanged from its file (a library's text, its unwind tables), where
 * the kernel writes one with no bytes. sorted: the segments by address. */
static void add_unsegmented(const struct corefile *c, struct rmem *m, const struct core_seg *sorted)
{
    for (size_t i = 0; i < c->info.nmaps; i++) {
        const struct core_map *f = &c->info.maps[i];
        uint64_t at = f->start;
        size_t lo = 0, hi = c->info.nsegs;

        if (c->map_fd[i] < 0)
            continue;
        while (lo < hi) { /* the first segment that ends after the map starts */
            size_t mid = (lo + hi) / 2;

            if (sorted[mid].vaddr + sorted[mid].memsz <= f->start)
                lo = mid + 1;
            else
                hi = mid;
        }
        for (size_t k = lo; k < c->info.nsegs && sorted[k].vaddr < f->end && at < f->end; k++) {
            if (sorted[k].vaddr > at)
                add_part(c, m, i, at, sorted[k].vaddr);
            if (sorted[k].vaddr + sorted[k].memsz > at)
                at = sorted[k].vaddr + sorted[k].memsz;
        }
        if (at < f->end)
            add_part(c, m, i, at, f->end);
    }
}

struct rmem *corefile_mem(const struct corefile *c)
{
    struct rmem *m = rmem_new_image();
    struct core_seg *sorted = x_calloc(c->info.nsegs + 1, sizeof(*sorted));

    for (size_t i = 0; i < c->info.nsegs; i++) {
        const struct core_seg *s = &c->info.segs[i];

        if (s->filesz)
            rmem_image_add_file(m, s->vaddr, c->fd, s->offset, (size_t)s->filesz);
        if (s->memsz > s->filesz && !(s->flags & PF_W))
            add_from_files(c, m, s->vaddr + s->filesz, s->vaddr + s->memsz);
        sorted[i] = *s;
    }
    qsort(sorted, c->info.nsegs, sizeof(*sorted), seg_cmp);
    add_unsegmented(c, m, sorted);
    free(sorted);
    return m;
}

void corefile_free(struct corefile *c)
{
    if (!c)
        return;
    for (size_t i = 0; c->map_same && i < c->info.nmaps; i++) {
        if (c->map_same[i] >= 0) /* shares the first map's file */
            continue;
        if (c->map_fd[i] >= 0)
            close(c->map_fd[i]);
        free(c->map_local[i]);
    }
    free(c->map_same);
    free(c->map_fd);
    free(c->map_local);
    free(c->map_len);
    if (c->fd >= 0)
        close(c->fd);
    core_info_fini(&c->info);
    free(c->note);
    free(c->path);
    free(c);
}
