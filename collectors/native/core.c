/* Native frames of recorded threads. native_core_open and native_core_thread: every thread of
 * a core that collectors/proc/corefile.c opened (its registers, its memory image, its mapped
 * files found on this machine for tables and symbols), for `dump --core --native`.
 * native_core_unwind: the first thread of an ELF core file (as the kernel or
 * qemu-user writes one), unwound with the live unwinder's accessors and table search
 * (unwind.c's native_walk_mem), the core as the memory. The core gives the registers (the
 * first NT_PRSTATUS note) and the memory it holds (PT_LOAD segments with file contents); the
 * program's ELF gives what a core leaves out, its read-only text and unwind tables (its
 * PT_LOAD contents, its PT_GNU_EH_FRAME). It is how the aarch64 register mapping and unwinding
 * are tested where aarch64 runs only under qemu-user, which emulates no ptrace.
 *
 * Invariants: both files are read whole into memory (at most CORE_MAX bytes each) and every
 * header, note and segment is checked against the buffer's length before it is used; only a
 * non-PIE program (ET_EXEC, whose addresses are the ones it runs at) is taken, and only a core
 * of this build's machine. No state outside one call; any thread. */
#include "arch.h"
#include "native_priv.h"

#include "ranktop/proc/corefile.h"
#include "ranktop/proc/procmaps.h"
#include "ranktop/base/util.h"

#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define CORE_MAX (256u << 20) /* bytes of a core or program read */
#define MAX_SEGS 4096
#define PRSTATUS_REGS 112 /* where pr_reg starts in a 64-bit struct elf_prstatus */

#if defined(__x86_64__)
#define CORE_MACHINE EM_X86_64
#elif defined(__aarch64__)
#define CORE_MACHINE EM_AARCH64
#endif

struct seg {
    uint64_t vaddr, len; /* the bytes held: file contents only */
    const uint8_t *data;
};

struct image {
    struct seg segs[MAX_SEGS];
    size_t nsegs;
    uint64_t eh_hdr, text_start, text_end; /* from the program; eh_hdr 0 when it has none */
};

/* The ELF header and program headers of buf, checked: 64-bit little-endian, of this machine,
 * of type type, every program header inside buf. NULL when not so. */
static const Elf64_Phdr *elf_phdrs(const uint8_t *buf, size_t len, int type, size_t *n)
{
    const Elf64_Ehdr *e = (const Elf64_Ehdr *)buf;

    if (len < sizeof(*e) || memcmp(e->e_ident, ELFMAG, SELFMAG) ||
        e->e_ident[EI_CLASS] != ELFCLASS64 || e->e_ident[EI_DATA] != ELFDATA2LSB ||
        e->e_machine != CORE_MACHINE || e->e_type != type || e->e_phentsize != sizeof(Elf64_Phdr))
        return NULL;
    if (e->e_phoff > len || (uint64_t)e->e_phnum * sizeof(Elf64_Phdr) > len - e->e_phoff ||
        e->e_phoff % 8)
        return NULL;
    *n = e->e_phnum;
    return (const Elf64_Phdr *)(buf + e->e_phoff);
}

/* Adds the file contents of a PT_LOAD to the image; false when they lie outside buf. */
static bool add_seg(struct image *im, const uint8_t *buf, size_t len, const Elf64_Phdr *p)
{
    if (p->p_offset > len || p->p_filesz > len - p->p_offset ||
        p->p_vaddr + p->p_filesz < p->p_vaddr)
        return false;
    if (p->p_filesz && im->nsegs < MAX_SEGS)
        im->segs[im->nsegs++] = (struct seg){p->p_vaddr, p->p_filesz, buf + p->p_offset};
    return true;
}

/* The registers of the first NT_PRSTATUS note of a PT_NOTE segment; false when none. */
static bool first_prstatus(const uint8_t *n, size_t len, struct arch_regs *regs)
{
    size_t off = 0;

    while (len - off >= 12) {
        uint32_t namesz, descsz, type;
        size_t name_end, desc_end;

        memcpy(&namesz, n + off, 4);
        memcpy(&descsz, n + off + 4, 4);
        memcpy(&type, n + off + 8, 4);
        name_end = off + 12 + (((size_t)namesz + 3) & ~(size_t)3);
        if (name_end > len || descsz > len - name_end)
            return false;
        desc_end = name_end + (((size_t)descsz + 3) & ~(size_t)3);
        if (type == NT_PRSTATUS && namesz == 5 && !memcmp(n + off + 12, "CORE", 5) &&
            descsz > PRSTATUS_REGS) {
            size_t rl = descsz - PRSTATUS_REGS;

            memset(regs, 0, sizeof(*regs));
            memcpy(regs->u.raw, n + name_end + PRSTATUS_REGS,
                   rl < sizeof(regs->u.raw) ? rl : sizeof(regs->u.raw));
            return true;
        }
        if (desc_end > len)
            return false;
        off = desc_end;
    }
    return false;
}

static int parse_core(const uint8_t *buf, size_t len, struct image *im, struct arch_regs *regs,
                      struct app_err *err)
{
    size_t n;
    const Elf64_Phdr *ph = elf_phdrs(buf, len, ET_CORE, &n);
    bool have_regs = false;

    if (!ph)
        return app_err_set(err, APP_E_PARSE, "not a 64-bit core file of this machine");
    for (size_t i = 0; i < n; i++) {
        if (ph[i].p_type == PT_LOAD && !add_seg(im, buf, len, &ph[i]))
            return app_err_set(err, APP_E_PARSE, "core segment %zu lies outside the file", i);
        if (ph[i].p_type == PT_NOTE && !have_regs) {
            if (ph[i].p_offset > len || ph[i].p_filesz > len - ph[i].p_offset)
                return app_err_set(err, APP_E_PARSE, "core notes lie outside the file");
            have_regs = first_prstatus(buf + ph[i].p_offset, ph[i].p_filesz, regs);
        }
    }
    return have_regs ? 0 : app_err_set(err, APP_E_PARSE, "core has no NT_PRSTATUS note");
}

/* The program's PT_LOAD contents (after the core's: what the core holds is newer) and where
 * its unwind table and text lie. */
static int parse_program(const uint8_t *buf, size_t len, struct image *im, struct app_err *err)
{
    size_t n;
    const Elf64_Phdr *ph = elf_phdrs(buf, len, ET_EXEC, &n);

    if (!ph)
        return app_err_set(err, APP_E_PARSE,
                           "program: not a 64-bit non-PIE executable of this machine");
    for (size_t i = 0; i < n; i++) {
        if (ph[i].p_type == PT_LOAD && !add_seg(im, buf, len, &ph[i]))
            return app_err_set(err, APP_E_PARSE, "program segment %zu lies outside the file", i);
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X)) {
            im->text_start = ph[i].p_vaddr;
            im->text_end = ph[i].p_vaddr + ph[i].p_memsz;
        }
        if (ph[i].p_type == PT_GNU_EH_FRAME)
            im->eh_hdr = ph[i].p_vaddr;
    }
    return 0;
}

static size_t image_read(void *src, uint64_t addr, void *buf, size_t len)
{
    const struct image *im = src;

    for (size_t i = 0; i < im->nsegs; i++) {
        const struct seg *s = &im->segs[i];

        if (addr >= s->vaddr && addr - s->vaddr < s->len) {
            size_t k = s->len - (addr - s->vaddr) < len ? s->len - (addr - s->vaddr) : len;

            memcpy(buf, s->data + (addr - s->vaddr), k);
            return k;
        }
    }
    return 0;
}

static bool image_ehframe(void *src, uint64_t ip, uint64_t *hdr, uint64_t *start, uint64_t *end)
{
    const struct image *im = src;

    if (!im->eh_hdr || ip < im->text_start || ip >= im->text_end)
        return false;
    *hdr = im->eh_hdr;
    *start = im->text_start;
    *end = im->text_end;
    return true;
}

int native_core_unwind(const char *core, const char *program, struct native_stack *out,
                       struct app_err *err)
{
    char *cbuf = NULL, *pbuf = NULL;
    size_t clen, plen;
    struct image *im = x_calloc(1, sizeof(*im));
    struct arch_regs regs;
    int rc;

    memset(out, 0, sizeof(*out));
    rc = file_read_regular(core, CORE_MAX, &cbuf, &clen);
    if (rc < 0)
        rc = app_err_set(err, rc, "%s: cannot read", core);
    else if ((rc = file_read_regular(program, CORE_MAX, &pbuf, &plen)) < 0)
        rc = app_err_set(err, rc, "%s: cannot read", program);
    else if ((rc = parse_core((const uint8_t *)cbuf, clen, im, &regs, err)) == 0 &&
             (rc = parse_program((const uint8_t *)pbuf, plen, im, err)) == 0) {
        struct native_mem mem = {image_read, image_ehframe, im};

        native_walk_mem(&mem, &regs, out);
    }
    free(cbuf);
    free(pbuf);
    free(im);
    return rc;
}

struct native_core {
    const struct corefile *c;
    struct rmem *mem;
    struct native_syms *syms;
};

static size_t nc_read(void *src, uint64_t addr, void *buf, size_t len)
{
    long got = rmem_read_some(((struct native_core *)src)->mem, addr, buf, len);

    return got > 0 ? (size_t)got : 0;
}

static bool nc_ehframe(void *src, uint64_t ip, uint64_t *hdr, uint64_t *start, uint64_t *end)
{
    return native_syms_ehframe(((struct native_core *)src)->syms, ip, hdr, start, end);
}

struct native_core *native_core_open(const struct corefile *c)
{
    struct native_core *nc = x_calloc(1, sizeof(*nc));
    struct procmaps maps = {x_calloc(c->info.nmaps + 1, sizeof(*maps.v)), c->info.nmaps};

    /* The maps as symbols.c reads them: each path the local file found, else a name that
     * is no path (no symbols, no tables: the unwinder then looks by itself). */
    for (size_t i = 0; i < c->info.nmaps; i++) {
        const struct core_map *m = &c->info.maps[i];

        maps.v[i] = (struct procmap){.start = m->start, .end = m->end, .offset = m->offset};
        memcpy(maps.v[i].perms, "r-xp", 5);
        maps.v[i].path = x_strdup(c->map_local[i] ? c->map_local[i] : "[not found]");
    }
    nc->c = c;
    nc->mem = corefile_mem(c);
    nc->syms = native_syms_open_maps(&maps);
    return nc;
}

void native_core_thread(struct native_core *nc, size_t i, struct native_stack *out)
{
    const struct core_thread *t = &nc->c->info.threads[i];
    struct native_mem mem = {nc_read, nc_ehframe, nc};
    struct arch_regs regs;

    memset(&regs, 0, sizeof(regs));
    memcpy(regs.u.raw, t->regs, t->nregs * sizeof(t->regs[0]));
    native_walk_mem(&mem, &regs, out);
    native_symbolize(nc->syms, out);
}

void native_core_close(struct native_core *nc)
{
    if (!nc)
        return;
    native_syms_close(nc->syms);
    rmem_free(nc->mem);
    free(nc);
}
