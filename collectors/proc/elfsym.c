/* ELF symbol and section lookup for interpreter binaries.
 *
 * elf_parse is pure and defensive: every header, table and string is range-checked against
 * the buffer before use, so a truncated or hostile file yields APP_E_PARSE, never a crash; and
 * its cost is bounded whatever the file claims: ELF_MAX_SYMS symbol entries in all (a file
 * may hold 65535 symbol tables over the same bytes) and one .rodata scan. elf_inspect_file
 * maps the file through tfile_map (a target controls it). Called from whichever thread
 * attaches to a process. */
#include "ranktop/proc/elfsym.h"
#include "ranktop/proc/tfile.h"

#include "ranktop/base/util.h"

#include <elf.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define ELF_MAX_SYMS 4000000u     /* symbol entries looked at, all tables together */
#define ELF_FILE_MAX (4ull << 30) /* an interpreter binary or libpython is far smaller */

/* The one machine this build reads: the CPython layouts, registers and pointer size are its, so
 * a target's ELF files must be 64-bit little-endian objects of it (one build per architecture;
 * 32-bit targets are refused, on either). */
#if defined(__x86_64__)
#define ELF_OWN_MACHINE EM_X86_64
#define ELF_OWN_NAME "x86-64"
#elif defined(__aarch64__)
#define ELF_OWN_MACHINE EM_AARCH64
#define ELF_OWN_NAME "aarch64"
#else
#error "collectors/proc/elfsym.c: no ELF machine for this architecture"
#endif

struct elf_buf {
    const uint8_t *p;
    size_t len;
    uint64_t syms_left; /* entries still allowed (ELF_MAX_SYMS at the start) */
    int rodata_seen;    /* the version scan runs on the first .rodata only */
};

static const void *elf_at(const struct elf_buf *b, uint64_t off, uint64_t size)
{
    if (off > b->len || size > b->len - off)
        return NULL;
    return b->p + off;
}

static const Elf64_Shdr *elf_shdr(const struct elf_buf *b, const Elf64_Ehdr *eh, unsigned i)
{
    if (i >= eh->e_shnum || eh->e_shentsize != sizeof(Elf64_Shdr))
        return NULL;
    return elf_at(b, eh->e_shoff + (uint64_t)i * sizeof(Elf64_Shdr), sizeof(Elf64_Shdr));
}

static const char *elf_str(const struct elf_buf *b, const Elf64_Shdr *strtab, uint32_t off)
{
    const char *s;

    if (!strtab || off >= strtab->sh_size)
        return NULL;
    s = elf_at(b, strtab->sh_offset + off, 1);
    if (!s || !memchr(s, '\0', strtab->sh_size - off) ||
        !elf_at(b, strtab->sh_offset, strtab->sh_size))
        return NULL;
    return s;
}

static void elf_take_symbol(struct elf_info *out, const char *name, const Elf64_Sym *sym)
{
    if (sym->st_shndx == SHN_UNDEF || sym->st_value == 0)
        return;
    if (!strcmp(name, "_PyRuntime") && !out->pyruntime) {
        out->pyruntime = sym->st_value;
        out->pyruntime_size = sym->st_size;
    } else if (!strcmp(name, "Py_Version") && !out->py_version) {
        out->py_version = sym->st_value;
    } else if (!strcmp(name, "PyCode_Type") && !out->pycode_type) {
        out->pycode_type = sym->st_value;
    }
}

static void elf_scan_symtab(struct elf_buf *b, const Elf64_Ehdr *eh, const Elf64_Shdr *sh,
                            struct elf_info *out)
{
    const Elf64_Shdr *strtab = elf_shdr(b, eh, sh->sh_link);
    uint64_t n;

    if (sh->sh_entsize != sizeof(Elf64_Sym) || !elf_at(b, sh->sh_offset, sh->sh_size))
        return;
    n = sh->sh_size / sizeof(Elf64_Sym);
    if (n > b->syms_left)
        n = b->syms_left;
    b->syms_left -= n;
    for (uint64_t i = 0; i < n; i++) {
        const Elf64_Sym *sym = (const void *)(b->p + sh->sh_offset + i * sizeof(Elf64_Sym));
        const char *name;

        if (ELF64_ST_TYPE(sym->st_info) != STT_OBJECT)
            continue;
        name = elf_str(b, strtab, sym->st_name);
        if (name)
            elf_take_symbol(out, name, sym);
    }
}

static int is_digit(uint8_t c)
{
    return c >= '0' && c <= '9';
}

/* Matches "\0" "3.<minor>.<micro>" "\0" at p: the PY_VERSION literal of the interpreter. */
static size_t version_at(const uint8_t *p, const uint8_t *end)
{
    const uint8_t *q = p;

    if (end - q < 6 || q[0] != '3' || q[1] != '.' || !is_digit(q[2]))
        return 0;
    q += 2;
    while (q < end && is_digit(*q))
        q++;
    if (q >= end || *q != '.' || q - p > 4)
        return 0;
    q++;
    if (q >= end || !is_digit(*q))
        return 0;
    while (q < end && is_digit(*q))
        q++;
    while (q < end && ((*q >= 'a' && *q <= 'c') || *q == 'r' || is_digit(*q) || *q == '+'))
        q++;
    if (q >= end || *q != '\0' || q - p >= 24)
        return 0;
    return (size_t)(q - p);
}

static void elf_scan_version(const struct elf_buf *b, const Elf64_Shdr *sh, struct elf_info *out)
{
    const uint8_t *p = elf_at(b, sh->sh_offset, sh->sh_size), *end;

    if (!p || sh->sh_type == SHT_NOBITS)
        return;
    end = p + sh->sh_size;
    for (const uint8_t *q = p + 1; q < end; q++) {
        size_t n;

        if (q[-1] != '\0' || *q != '3')
            continue;
        n = version_at(q, end);
        if (n) {
            memcpy(out->version, q, n);
            out->version[n] = '\0';
            return;
        }
    }
}

/* The symbols of every table of one type (SHT_DYNSYM or SHT_SYMTAB). */
static void elf_scan_symtabs(struct elf_buf *b, const Elf64_Ehdr *eh, uint32_t type,
                             struct elf_info *out)
{
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *sh = elf_shdr(b, eh, i);

        if (!sh)
            break;
        if (sh->sh_type == type)
            elf_scan_symtab(b, eh, sh, out);
    }
}

/* The exported symbols first: an interpreter exports the ones wanted, and its full symbol table
 * (tens of thousands of entries in a build that keeps it) is scanned only when the exports
 * lack one. The PY_VERSION literal is looked for in .rodata only without Py_Version (3.8-3.10,
 * and what no supported version is): a byte scan of a megabyte or more. Both were most of
 * what attaching to a process cost. */
static void elf_scan_sections(struct elf_buf *b, const Elf64_Ehdr *eh, struct elf_info *out)
{
    const Elf64_Shdr *shstr = elf_shdr(b, eh, eh->e_shstrndx);

    elf_scan_symtabs(b, eh, SHT_DYNSYM, out);
    if (!out->pyruntime || !out->pycode_type)
        elf_scan_symtabs(b, eh, SHT_SYMTAB, out);
    for (unsigned i = 0; i < eh->e_shnum; i++) {
        const Elf64_Shdr *sh = elf_shdr(b, eh, i);
        const char *name;

        if (!sh)
            break;
        name = elf_str(b, shstr, sh->sh_name);
        if (name && !strcmp(name, ".PyRuntime"))
            out->pyruntime_sec = sh->sh_addr;
        if (name && !strcmp(name, ".AsyncioDebug"))
            out->asyncio_debug = sh->sh_addr;
        if (name && !strcmp(name, ".bss")) {
            out->bss_addr = sh->sh_addr;
            out->bss_size = sh->sh_size;
        }
        if (name && !strcmp(name, ".rodata") && !b->rodata_seen++ && !out->py_version)
            elf_scan_version(b, sh, out);
    }
}

static int elf_first_load(const struct elf_buf *b, const Elf64_Ehdr *eh, struct elf_info *out)
{
    if (eh->e_phentsize != sizeof(Elf64_Phdr))
        return APP_E_PARSE;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph =
            elf_at(b, eh->e_phoff + (uint64_t)i * sizeof(Elf64_Phdr), sizeof(Elf64_Phdr));

        if (!ph)
            return APP_E_PARSE;
        if (ph->p_type == PT_LOAD) {
            /* The kernel and ld.so map a segment from its page (not its p_align): the page
             * the mapping in /proc/PID/maps starts at. */
            out->load_vaddr = ph->p_vaddr & ~((uint64_t)sys_page_size() - 1);
            return 0;
        }
    }
    return APP_E_PARSE;
}

static const char *machine_name(unsigned m)
{
    switch (m) {
    case EM_386:
        return "x86";
    case EM_X86_64:
        return "x86-64";
    case EM_ARM:
        return "arm";
    case EM_AARCH64:
        return "aarch64";
    case EM_PPC64:
        return "ppc64";
    case EM_S390:
        return "s390";
    case EM_RISCV:
        return "riscv";
    default:
        return "foreign";
    }
}

/* The class, byte order and machine, from the bytes every ELF header starts with (e_machine
 * is at the same offset in 32- and 64-bit headers): APP_E_ARCH, saying which, for any other
 * than this build's. */
static int elf_arch_check(const struct elf_buf *b, struct app_err *err)
{
    const uint8_t *id = elf_at(b, 0, EI_NIDENT + 4);
    unsigned machine;

    if (!id || memcmp(id, ELFMAG, SELFMAG) != 0)
        return app_err_set(err, APP_E_PARSE, "not an ELF file");
    machine = id[EI_DATA] == ELFDATA2MSB ? (unsigned)id[18] << 8 | id[19]
                                         : (unsigned)id[19] << 8 | id[18];
    if (id[EI_CLASS] == ELFCLASS32)
        return app_err_set(err, APP_E_ARCH,
                           "a 32-bit program for %s: ranktop reads 64-bit " ELF_OWN_NAME
                           " processes only",
                           machine_name(machine));
    if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB || machine != ELF_OWN_MACHINE)
        return app_err_set(err, APP_E_ARCH,
                           "a %sprogram for %s: this ranktop reads 64-bit " ELF_OWN_NAME
                           " processes (one build per architecture)",
                           id[EI_DATA] == ELFDATA2MSB ? "big-endian " : "", machine_name(machine));
    return 0;
}

int elf_parse(const uint8_t *buf, size_t len, struct elf_info *out, struct app_err *err)
{
    struct elf_buf b = {buf, len, ELF_MAX_SYMS, 0};
    const Elf64_Ehdr *eh;
    int rc;

    memset(out, 0, sizeof(*out));
    if ((rc = elf_arch_check(&b, err)) < 0)
        return rc;
    if (!(eh = elf_at(&b, 0, sizeof(Elf64_Ehdr))))
        return app_err_set(err, APP_E_PARSE, "not an ELF file");
    out->type = eh->e_type;
    if (elf_first_load(&b, eh, out) < 0)
        return app_err_set(err, APP_E_PARSE, "ELF file has no loadable segment");
    elf_scan_sections(&b, eh, out);
    return 0;
}

struct inspect {
    const struct tfile_map *m;
    struct elf_info *out;
    struct app_err *err;
};

static int inspect(void *arg)
{
    struct inspect *in = arg;

    return elf_parse(in->m->p, in->m->len, in->out, in->err);
}

int elf_inspect_file(const char *root, const char *path, struct elf_info *out, struct app_err *err)
{
    struct tfile_map m;
    struct inspect in = {&m, out, err};
    int rc = tfile_map(root, path, 0, ELF_FILE_MAX, &m, err);

    if (rc < 0)
        return rc;
    rc = tfile_guard(&m, inspect, &in, path, err);
    tfile_unmap(&m);
    return rc;
}
