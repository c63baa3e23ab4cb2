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
 * Every file is opened through tfile (a target controls its objects, its root and what debug
 * files it offers: a FIFO or device there is skipped, never waited on). What symbols may
 * cost is bounded per object and per process (struct budget): a table over what is left is
 * skipped whole, and the first such skip of an object is noted once (native_syms_take_notes).
 * One native_syms belongs to one native_ctx. */
#include "native_priv.h"

#include "ranktop/proc/procmaps.h"
#include "ranktop/proc/tfile.h"
#include "ranktop/base/util.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* What the symbols of one object, and of all objects of a process, may cost: the bytes of
 * symbol tables looked at (a debug file can claim a table of any size, and list 65535 tables
 * over the same bytes), the function symbols kept and the bytes of their names. The largest
 * objects seen (libtorch's 1.2 GB libraries, Chromium) stay well inside the object's. */
#define OBJ_TAB_BYTES (64ull << 20) /* about 2.8 million entries */
#define OBJ_SYMS 1000000u
#define OBJ_NAME_BYTES (64ull << 20)
#define ALL_TAB_BYTES (512ull << 20)
#define ALL_SYMS 4000000u
#define ALL_NAME_BYTES (256ull << 20)
#define NAME_MAX_BYTES 4096         /* a longer name is cut there, and not demangled */
#define FILE_MAX (64ull << 30)      /* mapped lazily: only headers and tables are read */
#define DEBUGDATA_MAX (16ull << 20) /* compressed .gnu_debugdata (MiniDebugInfo is KiB) */
#define MAPS_REREAD_NS 50000000ull

struct budget {
    uint64_t tab, names;
    size_t syms;
};

struct sym {
    uint64_t value, size;
    const char *name; /* demangled, without a version suffix ("@GLIBC_2.2.5"), owned */
    int pref;         /* among aliases at one address the lowest wins: global, weak, local */
};

struct segment {
    uint64_t offset, vaddr, filesz; /* a PT_LOAD: file bytes [offset, +filesz) at vaddr */
};

struct object {
    char *path;
    bool interp; /* the python executable or libpython */
    struct segment seg[16];
    uint64_t eh_vaddr;   /* PT_GNU_EH_FRAME: where .eh_frame_hdr is mapped; 0 none */
    uint64_t text_vaddr; /* the executable PT_LOAD */
    uint64_t text_memsz;
    size_t nseg;
    struct sym *syms;
    size_t nsyms, cap;
    struct budget left; /* what this object's symbols may still cost */
    bool noted;         /* a skip of this object was noted already */
};

struct native_syms {
    int pid;
    char root[64]; /* /proc/PID/root */
    struct procmaps maps;
    struct object *obj;
    size_t nobj;
    uint64_t maps_read_ns; /* when map_fresh last read the maps */
    struct budget left;    /* what all objects' symbols may still cost */
    char *notes;           /* lines not yet taken */
    size_t notes_len;
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
    snprintf(s->root, sizeof(s->root), "/proc/%d/root", pid);
    s->left = (struct budget){ALL_TAB_BYTES, ALL_NAME_BYTES, ALL_SYMS};
    *out = s;
    return 0;
}

struct native_syms *native_syms_open_maps(struct procmaps *maps)
{
    struct native_syms *s = x_calloc(1, sizeof(*s));

    s->maps = *maps;
    memset(maps, 0, sizeof(*maps));
    snprintf(s->root, sizeof(s->root), "/");
    s->left = (struct budget){ALL_TAB_BYTES, ALL_NAME_BYTES, ALL_SYMS};
    return s;
}

/* Says once per object why some of its symbols are missing (a line for the user). */
static void note(struct native_syms *s, struct object *o, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void note(struct native_syms *s, struct object *o, const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof(line), "native symbols of %s: ", o->path);
    va_list ap;
    size_t len;

    if (o->noted || n < 0)
        return;
    o->noted = true;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
    va_end(ap);
    str_scrub(line);
    len = strlen(line);
    s->notes = x_reallocarray(s->notes, s->notes_len + len + 2, 1);
    memcpy(s->notes + s->notes_len, line, len);
    s->notes_len += len;
    s->notes[s->notes_len++] = '\n';
    s->notes[s->notes_len] = '\0';
}

char *native_syms_take_notes(struct native_syms *s)
{
    char *n = s->notes;

    s->notes = NULL;
    s->notes_len = 0;
    return n;
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
    free(s->notes);
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

/* By address; aliases at one address with the preferred name last, where sym_at's search
 * lands: global, then weak, then local; a name other than glibc's hidden __GI_ alias of it
 * (__GI___clone3 beside clone3); then the first in byte order. */
static int cmp_sym(const void *a, const void *b)
{
    const struct sym *x = a, *y = b;
    int xgi = !strncmp(x->name, "__GI_", 5), ygi = !strncmp(y->name, "__GI_", 5);

    if (x->value != y->value)
        return (x->value > y->value) - (x->value < y->value);
    if (x->pref != y->pref)
        return y->pref - x->pref;
    if (xgi != ygi)
        return ygi - xgi;
    return strcmp(y->name, x->name);
}

/* Sorts an object's symbols and drops repeats (a symbol in .symtab, .dynsym and a debug file
 * is one symbol). */
static void sort_syms(struct object *o)
{
    size_t k = 0;

    x_qsort(o->syms, o->nsyms, sizeof(*o->syms), cmp_sym);
    for (size_t i = 0; i < o->nsyms; i++) {
        if (k && o->syms[k - 1].value == o->syms[i].value &&
            !strcmp(o->syms[k - 1].name, o->syms[i].name)) {
            free((char *)o->syms[i].name);
            continue;
        }
        o->syms[k++] = o->syms[i];
    }
    o->nsyms = k;
}

/* A symbol's name without its version ("__libc_start_main@GLIBC_2.2.5" in debug files); a
 * name of NAME_MAX_BYTES or more is cut there and left mangled. */
static char *sym_name(struct native_syms *s, const char *raw, size_t len)
{
    char *d = len < NAME_MAX_BYTES ? demangle(s, raw) : x_strndup(raw, NAME_MAX_BYTES);
    char *at = strchr(d, '@');

    if (at && at != d && !strchr(at, ' ') && !strchr(at, '('))
        *at = '\0';
    return d;
}

/* Takes nb table bytes from the object's and the process's budgets; false (nothing taken)
 * when either has less left. */
static bool take_table(struct native_syms *s, struct object *o, uint64_t nb)
{
    if (nb > o->left.tab || nb > s->left.tab)
        return false;
    o->left.tab -= nb;
    s->left.tab -= nb;
    return true;
}

/* Keeps one function symbol named raw (len bytes) when both budgets allow it. */
static bool keep_sym(struct native_syms *s, struct object *o, const Elf64_Sym *y, const char *raw,
                     size_t len)
{
    size_t cost = (len < NAME_MAX_BYTES ? len : NAME_MAX_BYTES) + 1;

    if (!o->left.syms || !s->left.syms || cost > o->left.names || cost > s->left.names)
        return false;
    o->left.syms--;
    s->left.syms--;
    o->left.names -= cost;
    s->left.names -= cost;
    o->syms[o->nsyms++] = (struct sym){y->st_value, y->st_size, sym_name(s, raw, len),
                                       ELF64_ST_BIND(y->st_info) == STB_GLOBAL ? 0
                                       : ELF64_ST_BIND(y->st_info) == STB_WEAK ? 1
                                                                               : 2};
    return true;
}

/* Adds the function symbols of one symbol table section (sh, whose strings are in str) of
 * file (named in a note when the table is over the budget). */
static void add_syms(struct native_syms *s, struct object *o, const char *file, const uint8_t *f,
                     size_t len, const Elf64_Shdr *sh, const Elf64_Shdr *str)
{
    size_t n;

    if (sh->sh_entsize != sizeof(Elf64_Sym) || sh->sh_offset > len ||
        sh->sh_size > len - sh->sh_offset || str->sh_offset > len ||
        str->sh_size > len - str->sh_offset)
        return;
    if (!take_table(s, o, sh->sh_size)) {
        note(s, o,
             "skipped the %s symbol table of %s: it claims %llu bytes, over the cap on symbol "
             "tables (%llu MiB an object, %llu MiB a process; %llu MiB left)",
             sh->sh_type == SHT_DYNSYM ? "dynamic" : "full", file, (unsigned long long)sh->sh_size,
             OBJ_TAB_BYTES >> 20, ALL_TAB_BYTES >> 20,
             (unsigned long long)((o->left.tab < s->left.tab ? o->left.tab : s->left.tab) >> 20));
        return;
    }
    n = sh->sh_size / sizeof(Elf64_Sym);
    for (size_t i = 0; i < n; i++) {
        Elf64_Sym y;
        const char *raw;
        int type;

        memcpy(&y, f + sh->sh_offset + i * sizeof(y), sizeof(y));
        type = ELF64_ST_TYPE(y.st_info);
        if ((type != STT_FUNC && type != STT_GNU_IFUNC) || y.st_shndx == SHN_UNDEF || !y.st_size ||
            y.st_name >= str->sh_size)
            continue;
        raw = (const char *)f + str->sh_offset + y.st_name;
        if (!memchr(raw, '\0', str->sh_size - y.st_name))
            continue;
        if (o->nsyms == o->cap) { /* grown as kept: a table's size is only a claim */
            o->cap = o->cap ? 2 * o->cap : 256;
            o->syms = x_reallocarray(o->syms, o->cap, sizeof(*o->syms));
        }
        if (!keep_sym(s, o, &y, raw, strnlen(raw, str->sh_size - y.st_name))) {
            note(s, o,
                 "kept the first %zu function symbols (of %s): the cap on what one "
                 "object's, or one process's, symbols may hold",
                 o->nsyms, file);
            return;
        }
    }
}

/* The section header i of an image whose header eh was validated. */
static const Elf64_Shdr *shdr(const uint8_t *f, const Elf64_Ehdr *eh, size_t i)
{
    return (const Elf64_Shdr *)(const void *)(f + eh->e_shoff + i * sizeof(Elf64_Shdr));
}

/* A section's bytes when they lie inside the image; NULL otherwise. */
static const uint8_t *sect_bytes(const uint8_t *f, size_t len, const Elf64_Shdr *sh)
{
    if (sh->sh_type == SHT_NOBITS || sh->sh_offset > len || sh->sh_size > len - sh->sh_offset)
        return NULL;
    return f + sh->sh_offset;
}

/* The section named name, or NULL (names from the section-name table, bounds checked). */
static const Elf64_Shdr *sect_named(const uint8_t *f, size_t len, const Elf64_Ehdr *eh,
                                    const char *name)
{
    const Elf64_Shdr *names;
    const uint8_t *str;
    size_t nl = strlen(name) + 1;

    if (eh->e_shstrndx == SHN_UNDEF || eh->e_shstrndx >= eh->e_shnum)
        return NULL;
    names = shdr(f, eh, eh->e_shstrndx);
    str = sect_bytes(f, len, names);
    for (size_t i = 0; str && i < eh->e_shnum; i++) {
        const Elf64_Shdr *sh = shdr(f, eh, i);

        if (sh->sh_name < names->sh_size && names->sh_size - sh->sh_name >= nl &&
            !memcmp(str + sh->sh_name, name, nl))
            return sh;
    }
    return NULL;
}

/* A validated ELF64 header of the image, or false. */
static bool elf_header(const uint8_t *f, size_t len, Elf64_Ehdr *eh)
{
    if (len < sizeof(*eh))
        return false;
    memcpy(eh, f, sizeof(*eh));
    return !memcmp(eh->e_ident, ELFMAG, SELFMAG) && eh->e_ident[EI_CLASS] == ELFCLASS64 &&
           eh->e_phentsize == sizeof(Elf64_Phdr) && eh->e_shentsize == sizeof(Elf64_Shdr) &&
           eh->e_phoff <= len && (size_t)eh->e_phnum * sizeof(Elf64_Phdr) <= len - eh->e_phoff &&
           eh->e_shoff <= len && (size_t)eh->e_shnum * sizeof(Elf64_Shdr) <= len - eh->e_shoff;
}

/* Every function symbol of an image (.symtab and .dynsym: a stripped object keeps only the
 * latter, a MiniDebugInfo one has the rest in .gnu_debugdata); file names it in notes. */
static void image_syms(struct native_syms *s, struct object *o, const char *file, const uint8_t *f,
                       size_t len, const Elf64_Ehdr *eh)
{
    for (size_t i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *sh = shdr(f, eh, i);

        if ((sh->sh_type == SHT_SYMTAB || sh->sh_type == SHT_DYNSYM) && sh->sh_link < eh->e_shnum)
            add_syms(s, o, file, f, len, sh, shdr(f, eh, sh->sh_link));
    }
}

/* .gnu_debugdata (MiniDebugInfo): an xz-compressed ELF whose .symtab names the static
 * functions a stripped object lost. Decoded with liblzma when this system has it. */
static void debugdata_syms(struct native_syms *s, struct object *o, const uint8_t *f, size_t len,
                           const Elf64_Ehdr *eh)
{
    const Elf64_Shdr *sh = sect_named(f, len, eh, ".gnu_debugdata");
    const uint8_t *in = sh ? sect_bytes(f, len, sh) : NULL;
    uint8_t *out;
    size_t n;
    Elf64_Ehdr deh;

    if (!in || !sh->sh_size)
        return;
    if (sh->sh_size > DEBUGDATA_MAX) {
        note(s, o, "skipped its .gnu_debugdata: %llu bytes, over %llu MiB",
             (unsigned long long)sh->sh_size, DEBUGDATA_MAX >> 20);
        return;
    }
    if (!native_xz_decode(in, sh->sh_size, &out, &n))
        return;
    if (elf_header(out, n, &deh))
        image_syms(s, o, ".gnu_debugdata", out, n, &deh);
    free(out);
}

/* The build id of the image as hex ("" when it has none). */
static void build_id(const uint8_t *f, size_t len, const Elf64_Ehdr *eh, char *hex, size_t hl)
{
    const Elf64_Shdr *sh = sect_named(f, len, eh, ".note.gnu.build-id");
    const uint8_t *p = sh ? sect_bytes(f, len, sh) : NULL;
    Elf64_Nhdr nh;

    hex[0] = '\0';
    if (!p || sh->sh_size < sizeof(nh))
        return;
    memcpy(&nh, p, sizeof(nh));
    if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 || nh.n_descsz < 2 || nh.n_descsz > 64 ||
        sizeof(nh) + 4 + (size_t)nh.n_descsz > sh->sh_size)
        return;
    for (size_t i = 0; i < nh.n_descsz && 2 * i + 3 <= hl; i++)
        snprintf(hex + 2 * i, 3, "%02x", p[sizeof(nh) + 4 + i]);
}

/* Calls fn on the image of root + path mapped read-only (tfile_map: root NULL or a directory
 * path stays inside). 0, or tfile_map's status when it cannot be; a file that is there but
 * is no regular file, or too large, is noted. */
struct image_call {
    void (*fn)(void *, const char *, const uint8_t *, size_t);
    void *arg;
    const char *path;
    const struct tfile_map *m;
};

static int image_call(void *arg)
{
    struct image_call *c = arg;

    c->fn(c->arg, c->path, c->m->p, c->m->len);
    return 0;
}

static int with_image(struct native_syms *s, struct object *o, const char *root, const char *path,
                      unsigned flags, void (*fn)(void *, const char *, const uint8_t *, size_t),
                      void *arg)
{
    struct tfile_map m;
    struct app_err err = {0};
    struct image_call c = {fn, arg, path, &m};
    int rc = tfile_map(root, path, flags, FILE_MAX, &m, &err);

    if (rc < 0) {
        if (rc == APP_E_NOTREG || rc == APP_E_LIMIT)
            note(s, o, "skipped %s", err.msg);
        return rc;
    }
    /* A file cut short under the read leaves what was read of it, said once. */
    if (tfile_guard(&m, image_call, &c, path, &err) < 0)
        note(s, o, "%s", err.msg);
    tfile_unmap(&m);
    return 0;
}

struct debug_load {
    struct native_syms *s;
    struct object *o;
    const char *id; /* the object's build id */
    bool used;
};

/* A debug file found under the object's build id is used only when it carries that id: a
 * stale or stray file at that path would name every frame wrongly, so it is skipped, said. */
static void debug_image(void *arg, const char *path, const uint8_t *f, size_t len)
{
    struct debug_load *d = arg;
    Elf64_Ehdr eh;
    char id[136];

    if (!elf_header(f, len, &eh))
        return;
    build_id(f, len, &eh, id, sizeof(id));
    if (strcmp(id, d->id)) {
        note(d->s, d->o, "skipped %s: its build id is %s, not the object's", path,
             id[0] ? id : "missing");
        return;
    }
    image_syms(d->s, d->o, path, f, len, &eh);
    d->used = true;
}

/* The separate debug file of a build id, as gdb finds it: DEBUGDIR/.build-id/xx/rest.debug,
 * in the target's root first (a container's own debug packages), then in ours; the first
 * found that carries the same build id is used. DEBUGDIR is /usr/lib/debug, or each of
 * $RANKTOP_DEBUG_DIR's colon-separated directories. Links are followed (distributions make
 * .build-id entries links), those in the target's root inside that root. */
static void debugfile_syms(struct native_syms *s, struct object *o, const char *id)
{
    const char *dirs = getenv("RANKTOP_DEBUG_DIR");
    struct debug_load d = {s, o, id, false};
    char rel[4200];

    if (!id[0])
        return;
    dirs = dirs && dirs[0] ? dirs : "/usr/lib/debug";
    for (const char *p = dirs; *p && !d.used; p += *p == ':') {
        size_t n = strcspn(p, ":");

        snprintf(rel, sizeof(rel), "%.*s/.build-id/%.2s/%s.debug", (int)n, p, id, id + 2);
        p += n;
        if (rel[0] != '/')
            continue; /* a relative directory: the target's root would not apply */
        if (with_image(s, o, s->root, rel, 0, debug_image, &d) < 0 || !d.used)
            with_image(s, o, NULL, rel, 0, debug_image, &d);
    }
}

struct elf_load {
    struct native_syms *s;
    struct object *o;
    char id[136];
};

/* Segments and symbols of one mapped object's image; its debug data too. */
static void parse_elf(void *arg, const char *path, const uint8_t *f, size_t len)
{
    struct elf_load *l = arg;
    struct object *o = l->o;
    Elf64_Ehdr eh;

    if (!elf_header(f, len, &eh))
        return;
    for (size_t i = 0; i < eh.e_phnum && o->nseg < 16; i++) {
        Elf64_Phdr ph;

        memcpy(&ph, f + eh.e_phoff + i * sizeof(ph), sizeof(ph));
        if (ph.p_type == PT_LOAD)
            o->seg[o->nseg++] = (struct segment){ph.p_offset, ph.p_vaddr, ph.p_filesz};
        if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && !o->text_memsz) {
            o->text_vaddr = ph.p_vaddr;
            o->text_memsz = ph.p_memsz;
        }
        if (ph.p_type == PT_GNU_EH_FRAME)
            o->eh_vaddr = ph.p_vaddr;
    }
    image_syms(l->s, o, path, f, len, &eh);
    debugdata_syms(l->s, o, f, len, &eh);
    build_id(f, len, &eh, l->id, sizeof(l->id));
}

static bool is_interp(const char *path)
{
    const char *b = strrchr(path, '/');

    b = b ? b + 1 : path;
    return !strncmp(b, "python", 6) || !strncmp(b, "libpython", 9);
}

/* The object mapped at m, by its path, loaded on first use from where procmaps_file_path
 * finds that very file (the target's root, ours for a chrooted target, map_files); a file
 * that cannot be read has no symbols. */
static struct object *object_of(struct native_syms *s, const struct procmap *m)
{
    const char *path = m->path;
    char full[4200];
    struct object *o;
    struct elf_load l;
    int rc;

    for (size_t i = 0; i < s->nobj; i++)
        if (!strcmp(s->obj[i].path, path))
            return &s->obj[i];
    s->obj = x_reallocarray(s->obj, s->nobj + 1, sizeof(*s->obj));
    o = memset(&s->obj[s->nobj++], 0, sizeof(*o));
    o->path = x_strdup(path);
    o->interp = is_interp(path);
    o->left = (struct budget){OBJ_TAB_BYTES, OBJ_NAME_BYTES, OBJ_SYMS};
    l = (struct elf_load){s, o, ""};
    /* procmaps_file_path finds the very file mapped (device and inode checked): in the
     * target's root, in ours for a target chrooted below ours (its maps name our paths), or
     * through map_files; tfile then opens it without blocking, as a regular file only. */
    if (s->pid > 0)
        rc = procmaps_file_path(s->pid, m, full, sizeof(full));
    else /* recorded maps: the path is the local file found for it */
        rc = snprintf(full, sizeof(full), "%s", path) < (int)sizeof(full) ? 0 : APP_E_NOTFOUND;
    if (rc == 0)
        rc = with_image(s, o, NULL, full, 0, parse_elf, &l);
    if (rc == 0)
        debugfile_syms(s, o, l.id); /* after the image is unmapped: one file at a time */
    sort_syms(o);
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
    o = object_of(s, m);
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

/* The load bias of o as mapped by m: the address of file offset x, in the segment that holds
 * m's offset, is bias + vaddr(x). false when no segment holds it. */
static bool load_bias(const struct object *o, const struct procmap *m, uint64_t *bias)
{
    for (size_t i = 0; i < o->nseg; i++) {
        uint64_t from = o->seg[i].offset & ~(uint64_t)4095;

        if (m->offset >= from && m->offset < o->seg[i].offset + o->seg[i].filesz) {
            *bias = m->start - (m->offset - o->seg[i].offset + o->seg[i].vaddr);
            return true;
        }
    }
    return false;
}

/* Reads the maps again when ip falls in none (a library loaded since), at most every
 * MAPS_REREAD_NS: an address past the end of a stack falls in none either. */
static const struct procmap *map_fresh(struct native_syms *s, uint64_t ip)
{
    const struct procmap *m = map_of(&s->maps, ip);
    uint64_t now = clock_mono_ns();
    struct procmaps fresh;

    if (m || s->pid <= 0 || now - s->maps_read_ns < MAPS_REREAD_NS)
        return m;
    s->maps_read_ns = now;
    if (procmaps_read(s->pid, &fresh, NULL) == 0) {
        procmaps_fini(&s->maps);
        s->maps = fresh;
    }
    return map_of(&s->maps, ip);
}

bool native_syms_in_file(struct native_syms *s, uint64_t ip)
{
    const struct procmap *m = map_fresh(s, ip);

    return m && m->path[0] == '/';
}

bool native_syms_ehframe(struct native_syms *s, uint64_t ip, uint64_t *hdr, uint64_t *start,
                         uint64_t *end)
{
    const struct procmap *m = map_of(&s->maps, ip);
    const struct object *o;
    uint64_t bias;

    if (!m || m->path[0] != '/')
        return false;
    o = object_of(s, m);
    if (!o->eh_vaddr || !o->text_memsz || !load_bias(o, m, &bias))
        return false;
    *hdr = bias + o->eh_vaddr;
    *start = bias + o->text_vaddr;
    *end = *start + o->text_memsz;
    return ip >= *start && ip < *end;
}

void native_symbolize(struct native_syms *s, struct native_stack *st)
{
    bool reread = false;

    for (size_t i = 0; i < st->n; i++) {
        if (!map_of(&s->maps, st->frames[i].ip) && !reread && s->pid > 0) { /* loaded since */
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
