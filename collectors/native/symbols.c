/* Names for native frames: which mapped object an address falls in (/proc/PID/maps, read again
 * when an address falls in none), that object's function symbols (.symtab when the file has
 * one, else .dynsym; read through /proc/PID/root so container paths work), the symbol whose
 * [value, value + size) holds the address -- never the nearest preceding one, which names
 * static functions of stripped objects wrongly -- and C++ names demangled with the C ABI's
 * __cxa_demangle when libstdc++ is there. Evaluation-loop frames are those inside
 * _PyEval_EvalFrameDefault (or the old PyEval_EvalFrameEx) of the interpreter object.
 *
 * Invariants: files are only read (mmap, read-only), every offset and size from an ELF is
 * checked against the file's length; names are owned here and live until native_syms_close.
 * One native_syms belongs to one native_ctx. */
#include "native_priv.h"

#include "ranktop/procmaps.h"
#include "ranktop/util.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct sym {
    uint64_t value, size;
    const char *name; /* demangled, owned */
};

struct segment {
    uint64_t offset, vaddr, filesz; /* a PT_LOAD: file bytes [offset, +filesz) at vaddr */
};

struct object {
    char *path;
    bool interp; /* the python executable or libpython */
    struct segment seg[16];
    size_t nseg;
    struct sym *syms;
    size_t nsyms;
};

struct native_syms {
    int pid;
    struct procmaps maps;
    struct object *obj;
    size_t nobj;
    char *(*demangle)(const char *, char *, size_t *, int *);
    bool demangle_tried;
};

int native_syms_open(int pid, struct native_syms **out, struct app_err *err)
{
    struct native_syms *s = x_calloc(1, sizeof(*s));
    int rc = procmaps_read(pid, &s->maps, err);

    if (rc < 0) {
        free(s);
        return rc;
    }
    s->pid = pid;
    *out = s;
    return 0;
}

void native_syms_close(struct native_syms *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->nobj; i++) {
        for (size_t k = 0; k < s->obj[i].nsyms; k++)
            free((char *)s->obj[i].syms[k].name);
        free(s->obj[i].syms);
        free(s->obj[i].path);
    }
    free(s->obj);
    procmaps_fini(&s->maps);
    free(s);
}

/* C++ names through libstdc++'s __cxa_demangle, which has C linkage; without libstdc++ in
 * this process the mangled name stays. */
static char *demangle(struct native_syms *s, const char *name)
{
    int status = -1;
    char *d;

    if (strncmp(name, "_Z", 2))
        return x_strdup(name);
    if (!s->demangle_tried) {
        void *lib = dlopen("libstdc++.so.6", RTLD_LAZY | RTLD_LOCAL);

        s->demangle_tried = true;
        if (lib)
            *(void **)&s->demangle = dlsym(lib, "__cxa_demangle");
    }
    d = s->demangle ? s->demangle(name, NULL, NULL, &status) : NULL;
    if (d && status == 0) {
        char *own = x_strdup(d);

        free(d);
        return own;
    }
    free(d);
    return x_strdup(name);
}

static int cmp_sym(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;

    return (x->value > y->value) - (x->value < y->value);
}

/* Adds the function symbols of one symbol table section (sh, whose strings are in str). */
static void add_syms(struct native_syms *s, struct object *o, const uint8_t *f, size_t len,
                     const Elf64_Shdr *sh, const Elf64_Shdr *str)
{
    size_t n;

    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_offset > len ||
        sh->sh_size > len - sh->sh_offset || str->sh_offset > len ||
        str->sh_size > len - str->sh_offset)
        return;
    n = sh->sh_size / sizeof(Elf64_Sym);
    o->syms = x_reallocarray(o->syms, o->nsyms + n + 1, sizeof(*o->syms));
    for (size_t i = 0; i < n; i++) {
        Elf64_Sym y;
        int type;

        memcpy(&y, f + sh->sh_offset + i * sizeof(y), sizeof(y));
        type = ELF64_ST_TYPE(y.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || y.st_shndx == SHN_UNDEF || !y.st_size ||
            y.st_name >= str->sh_size ||
            !memchr(f + str->sh_offset + y.st_name, '\0', str->sh_size - y.st_name))
            continue;
        o->syms[o->nsyms++] = (struct sym){
            y.st_value, y.st_size, demangle(s, (const char *)f + str->sh_offset + y.st_name)};
    }
}

/* Segments and symbols of one ELF image (len bytes at f); .symtab wins over .dynsym. */
static void parse_elf(struct native_syms *s, struct object *o, const uint8_t *f, size_t len)
{
    Elf64_Ehdr eh;
    const Elf64_Shdr *sym = NULL;

    if (len < sizeof(eh))
        return;
    memcpy(&eh, f, sizeof(eh));
    if (memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        eh.e_phoff > len || (size_t)eh.e_phnum * sizeof(Elf64_Phdr) > len - eh.e_phoff ||
        eh.e_shoff > len || (size_t)eh.e_shnum * sizeof(Elf64_Shdr) > len - eh.e_shoff)
        return;
    for (size_t i = 0; i < eh.e_phnum && o->nseg < 16; i++) {
        Elf64_Phdr ph;

        memcpy(&ph, f + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD)
            o->seg[o->nseg++] = (struct segment){ph.p_offset, ph.p_vaddr, ph.p_filesz};
    }
    for (size_t i = 0; i < eh.e_shnum; i++) {
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(const void *)(f + eh.e_shoff + i * sizeof(*sh));

        if (sh->sh_type == SHT_SYMTAB || (sh->sh_type == SHT_DYNSYM && !sym))
            sym = sh;
    }
    if (sym && sym->sh_link < eh.e_shnum)
        add_syms(s, o, f, len, sym,
                 (const Elf64_Shdr *)(const void *)(f + eh.e_shoff + sym->sh_link * sizeof(*sym)));
    qsort(o->syms, o->nsyms, sizeof(*o->syms), cmp_sym);
}

static bool is_interp(const char *path)
{
    const char *b = strrchr(path, '/');

    b = b ? b + 1 : path;
    return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* The object for path, loaded on first use (a file that cannot be read has no symbols). */
static struct object *object_of(struct native_syms *s, const char *path)
{
    char full[4200];
    struct object *o;
    struct stat st;
    int fd;

    for (size_t i = 0; i < s->nobj; i++)
        if (!strcmp(s->obj[i].path, path))
            return &s->obj[i];
    s->obj = x_reallocarray(s->obj, s->nobj + 1, sizeof(*s->obj));
    o = memset(&s->obj[s->nobj++], 0, sizeof(*o));
    o->path = x_strdup(path);
    o->interp = is_interp(path);
    snprintf(full, sizeof(full), "/proc/%d/root%s", s->pid, path);
    fd = open(full, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0 && st.st_size > 0) {
        void *f = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);

        if (f != MAP_FAILED) {
            parse_elf(s, o, f, (size_t)st.st_size);
            munmap(f, (size_t)st.st_size);
        }
    }
    if (fd >= 0)
        close(fd);
    return o;
}

static const struct procmap *map_of(const struct procmaps *m, uint64_t ip)
{
    for (size_t i = 0; i < m->n; i++)
        if (ip >= m->v[i].start && ip < m->v[i].end)
            return &m->v[i];
    return NULL;
}

static const struct sym *sym_at(const struct object *o, uint64_t vaddr)
{
    size_t lo = 0, hi = o->nsyms;

    while (lo < hi) { /* the last symbol starting at or before vaddr */
        size_t mid = (lo + hi) / 2;

        if (o->syms[mid].value <= vaddr)
            lo = mid + 1;
        else
            hi = mid;
    }
    /* Sizes overlap rarely (aliases); look back a little for one that holds vaddr. */
    for (size_t k = lo, back = 0; k-- > 0 && back < 8; back++)
        if (vaddr < o->syms[k].value + o->syms[k].size)
            return &o->syms[k];
    return NULL;
}

static bool eval_name(const char *n)
{
    return !strncmp(n, "_PyEval_EvalFrameDefault", 24) || !strncmp(n, "PyEval_EvalFrameEx", 18);
}

static void name_frame(struct native_syms *s, struct native_frame *fr, bool innermost)
{
    /* A return address may point past the call at its function's very end. */
    uint64_t look = innermost ? fr->ip : fr->ip - 1;
    const struct procmap *m = map_of(&s->maps, look);
    struct object *o;
    uint64_t off;

    fr->object = "";
    if (!m || m->path[0] != '/')
        return;
    o = object_of(s, m->path);
    off = look - m->start + m->offset;
    fr->object = o->path;
    fr->interp = o->interp;
    fr->offset = off;
    for (size_t i = 0; i < o->nseg; i++)
        if (off >= o->seg[i].offset && off < o->seg[i].offset + o->seg[i].filesz) {
            const struct sym *y = sym_at(o, off - o->seg[i].offset + o->seg[i].vaddr);

            if (y) {
                fr->function = y->name;
                fr->eval = o->interp && eval_name(y->name);
            }
            break;
        }
}

void native_symbolize(struct native_syms *s, struct native_stack *st)
{
    bool reread = false;

    for (size_t i = 0; i < st->n; i++) {
        if (!map_of(&s->maps, st->frames[i].ip) && !reread) { /* a library loaded since */
            struct procmaps m;

            reread = true;
            if (procmaps_read(s->pid, &m, NULL) == 0) {
                procmaps_fini(&s->maps);
                s->maps = m;
            }
        }
        name_frame(s, &st->frames[i], i == 0);
    }
}
