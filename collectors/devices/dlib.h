/* Vendor libraries loaded at run time: the file search and the symbol tables shared by the
 * NVML and DCMI modules, so neither needs the library at build time. Any thread; nothing here
 * keeps state between calls. */
#ifndef RANKTOP_DLIB_H
#define RANKTOP_DLIB_H

#include <stdbool.h>
#include <stddef.h>

#include "ranktop/base/status.h"

/* Where one vendor library is looked for and how its failures are worded. */
struct dlib_spec {
    const char *who;      /* "NVML": the first word of every message */
    const char *env;      /* variable naming the file to load instead of searching */
    int flags;            /* dlopen flags added to RTLD_NOW | RTLD_LOCAL */
    const char *fallback; /* name kept as the path when nothing is found */
    const char *hint;     /* tail of the "not found" message, e.g. " (no NVIDIA driver?)" */
    const char *what;     /* "an NVML library", for a file that lacks a required symbol */
};

/* One entry point: the names to try, newest version first (NULL-terminated), and the
 * function-pointer variable that receives the first one the library exports. */
struct dlib_sym {
    void *fnp;
    const char *const *names;
    const char *required; /* NULL: optional; else the name a "no symbol" message uses */
    const char **bound;   /* when not NULL, receives the name that was bound (or NULL) */
};

#define DLIB_NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Loads the file $spec->env names, else the first of the n candidates that exists (empty
 * strings are skipped). On success *lib is the handle and path holds the file; a file that
 * exists but cannot be loaded stops the search. Returns APP_E_NOTFOUND when nothing is found,
 * APP_E_IO when dlopen refuses a file, with a one-line message in err. */
int dlib_open(const struct dlib_spec *spec, const char *const *candidates, size_t n, void **lib,
              char *path, size_t cap, struct app_err *err);

/* Binds every entry of syms that lib exports. Returns the `required` name of the first
 * required entry the library lacks (table order is the order of blame), or NULL. */
const char *dlib_bind(void *lib, const struct dlib_sym *syms, size_t n);

/* The message for a library without a required symbol; returns APP_E_NOTFOUND. */
int dlib_missing(const struct dlib_spec *spec, const char *path, const char *symbol,
                 struct app_err *err);

#endif
