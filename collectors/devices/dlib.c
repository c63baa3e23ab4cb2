/* The dlopen side of the vendor-library modules (nvml.c, dcmi.c): finding the file, binding
 * entry points by name with versioned fallbacks, and wording the failures the same way for
 * both vendors.
 *
 * Owns nothing after a call returns: the handle goes to the caller, who dlcloses it. A missing
 * file is APP_E_NOTFOUND (the host simply lacks the vendor), a file dlopen refuses (wrong
 * architecture, unresolved dependencies) is APP_E_IO, because only the second is worth telling
 * the user about. Any thread; dlerror's state is per thread. */
#include "dlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Function pointers are filled by copying dlsym's object pointer, which POSIX allows only
 * where both have the same size. */
_Static_assert(sizeof(void (*)(void)) == sizeof(void *), "dlsym into function pointers");

/* One dlopen attempt; `from` names the variable the path came from, or is "". */
static int try_load(const struct dlib_spec *spec, const char *file, const char *from, void **lib,
                    struct app_err *err)
{
    const char *why;

    *lib = dlopen(file, RTLD_NOW | RTLD_LOCAL | spec->flags);
    if (*lib)
        return 0;
    why = dlerror();
    why = why ? why : "dlopen failed";
    if (strstr(why, "No such file") || (strchr(file, '/') && access(file, F_OK) != 0))
        return app_err_set(err, APP_E_NOTFOUND, "%s: %s%s not found", spec->who, file, from);
    return app_err_set(err, APP_E_IO, "%s: cannot load %s%s: %s", spec->who, file, from, why);
}

int dlib_open(const struct dlib_spec *spec, const char *const *candidates, size_t n, void **lib,
              char *path, size_t cap, struct app_err *err)
{
    const char *env = getenv(spec->env);
    char from[64];

    if (env && *env) {
        snprintf(path, cap, "%s", env);
        snprintf(from, sizeof(from), " (from %s)", spec->env);
        return try_load(spec, env, from, lib, err);
    }
    for (size_t i = 0; i < n; i++) {
        int rc;

        if (!candidates[i][0])
            continue;
        snprintf(path, cap, "%s", candidates[i]);
        rc = try_load(spec, candidates[i], "", lib, err);
        if (rc != APP_E_NOTFOUND) /* loaded, or present but unusable: say why */
            return rc;
    }
    snprintf(path, cap, "%s", spec->fallback);
    return app_err_set(err, APP_E_NOTFOUND, "%s: %s not found%s", spec->who, spec->fallback,
                       spec->hint);
}

/* Stores the first of names that lib exports into *fnp; returns that name, or NULL. */
static const char *bind_one(void *lib, void *fnp, const char *const *names)
{
    for (; *names; names++) {
        void *sym = dlsym(lib, *names);

        if (sym) {
            memcpy(fnp, &sym, sizeof(sym));
            return *names;
        }
    }
    return NULL;
}

const char *dlib_bind(void *lib, const struct dlib_sym *syms, size_t n)
{
    const char *missing = NULL;

    for (size_t i = 0; i < n; i++) {
        const char *got = bind_one(lib, syms[i].fnp, syms[i].names);

        if (syms[i].bound)
            *syms[i].bound = got;
        if (!got && syms[i].required && !missing)
            missing = syms[i].required;
    }
    return missing;
}

int dlib_missing(const struct dlib_spec *spec, const char *path, const char *symbol,
                 struct app_err *err)
{
    return app_err_set(err, APP_E_NOTFOUND, "%s (%s): no symbol %s; not %s?", spec->who, path,
                       symbol, spec->what);
}
