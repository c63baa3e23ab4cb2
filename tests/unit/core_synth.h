/* A small ELF core of this build's machine, made in memory for the core reader's tests
 * (check_corefile.c, tests/fuzz/fuzz_corefile.c): two threads (NT_PRSTATUS, TIDs 100 and 101),
 * NT_PRPSINFO (pid 100, "prog --x"), NT_AUXV (AT_PHDR in the program), NT_SIGINFO (SIGSEGV)
 * and NT_FILE naming one file mapped r-x at SYN_TEXT for two pages, of which the core holds
 * the first (as the kernel dumps an ELF object's first page), and a dumped rw page at
 * SYN_DATA. The mapped file's bytes are syn_file_byte(i); the data page's syn_data_byte(i). */
#ifndef RANKTOP_CORE_SYNTH_H
#define RANKTOP_CORE_SYNTH_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define SYN_PAGE 4096u
#define SYN_TEXT 0x400000u
#define SYN_DATA 0x600000u
#define SYN_SIZE (3u * SYN_PAGE) /* the whole core */

#if defined(__x86_64__)
#define SYN_MACHINE EM_X86_64
#define SYN_NREGS 27
#else
#define SYN_MACHINE EM_AARCH64
#define SYN_NREGS 34
#endif

static inline uint8_t syn_file_byte(size_t i)
{
    return (uint8_t)(i * 7 + 3);
}

static inline uint8_t syn_data_byte(size_t i)
{
    return (uint8_t)(i * 13 + 1);
}

/* Appends a "CORE" note at *at; returns the descriptor's offset. */
static inline size_t syn_note(uint8_t *b, size_t *at, uint32_t type, size_t descsz)
{
    uint32_t h[3] = {5, (uint32_t)descsz, type};
    size_t d;

    memcpy(b + *at, h, sizeof(h));
    memcpy(b + *at + 12, "CORE", 5);
    d = *at + 12 + 8;
    *at = d + ((descsz + 3) & ~(size_t)3);
    return d;
}

static inline void syn_put64(uint8_t *p, uint64_t v)
{
    memcpy(p, &v, 8);
}

static inline void syn_put32(uint8_t *p, uint32_t v)
{
    memcpy(p, &v, 4);
}

/* Writes the core (SYN_SIZE bytes) into b; path is the mapped file's name (under 200 bytes).
 * Returns the end of its notes. */
static inline size_t syn_core(uint8_t *b, const char *path)
{
    Elf64_Ehdr eh = {0};
    Elf64_Phdr ph[3] = {{0}};
    size_t at = sizeof(eh) + sizeof(ph), notes = at, d, prs = 112 + SYN_NREGS * 8 + 8;
    size_t plen = strlen(path) + 1;

    memset(b, 0, SYN_SIZE);
    memcpy(eh.e_ident, ELFMAG, SELFMAG);
    eh.e_ident[EI_CLASS] = ELFCLASS64;
    eh.e_ident[EI_DATA] = ELFDATA2LSB;
    eh.e_ident[EI_VERSION] = EV_CURRENT;
    eh.e_type = ET_CORE;
    eh.e_machine = SYN_MACHINE;
    eh.e_version = EV_CURRENT;
    eh.e_phoff = sizeof(eh);
    eh.e_ehsize = sizeof(eh);
    eh.e_phentsize = sizeof(Elf64_Phdr);
    eh.e_phnum = 3;
    memcpy(b, &eh, sizeof(eh));
    for (int t = 0; t < 2; t++) { /* NT_PRSTATUS: pid at 32, cursig at 12 */
        d = syn_note(b, &at, NT_PRSTATUS, prs);
        syn_put32(b + d + 32, 100u + (uint32_t)t);
        b[d + 12] = 11;
    }
    d = syn_note(b, &at, NT_PRPSINFO, 136);
    syn_put32(b + d + 24, 100);
    memcpy(b + d + 40, "prog", 4);
    memcpy(b + d + 56, "prog --x", 8);
    d = syn_note(b, &at, NT_AUXV, 32);
    syn_put64(b + d, AT_PHDR);
    syn_put64(b + d + 8, SYN_TEXT + 64);
    d = syn_note(b, &at, 0x46494c45u, 16 + 24 + plen); /* NT_FILE */
    syn_put64(b + d, 1);
    syn_put64(b + d + 8, SYN_PAGE);
    syn_put64(b + d + 16, SYN_TEXT);
    syn_put64(b + d + 24, SYN_TEXT + 2 * SYN_PAGE);
    syn_put64(b + d + 32, 0);
    memcpy(b + d + 40, path, plen);
    d = syn_note(b, &at, 0x53494749u, 128); /* NT_SIGINFO */
    syn_put32(b + d, 11);
    ph[0] = (Elf64_Phdr){.p_type = PT_NOTE, .p_offset = notes, .p_filesz = at - notes};
    ph[1] = (Elf64_Phdr){.p_type = PT_LOAD,
                         .p_flags = PF_R | PF_X,
                         .p_offset = SYN_PAGE,
                         .p_vaddr = SYN_TEXT,
                         .p_filesz = SYN_PAGE,
                         .p_memsz = 2 * SYN_PAGE};
    ph[2] = (Elf64_Phdr){.p_type = PT_LOAD,
                         .p_flags = PF_R | PF_W,
                         .p_offset = 2 * SYN_PAGE,
                         .p_vaddr = SYN_DATA,
                         .p_filesz = SYN_PAGE,
                         .p_memsz = SYN_PAGE};
    memcpy(b + sizeof(eh), ph, sizeof(ph));
    for (size_t i = 0; i < SYN_PAGE; i++) {
        b[SYN_PAGE + i] = syn_file_byte(i);
        b[2 * SYN_PAGE + i] = syn_data_byte(i);
    }
    return at;
}

#endif
