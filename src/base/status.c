/* Status codes to text and the app_err filler. Stateless; any thread. */
#include "ranktop/base/status.h"

#include <stdio.h>

int app_err_set(struct app_err *err, int code, const char *fmt, ...)
{
    va_list ap;

    if (!err)
        return code;
    err->code = code;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof(err->msg), fmt, ap);
    va_end(ap);
    return code;
}

const char *app_status_str(int code)
{
    switch (code) {
    case APP_OK:
        return "ok";
    case APP_E_NOTFOUND:
        return "not found";
    case APP_E_PERM:
        return "permission denied";
    case APP_E_TIMEOUT:
        return "timed out";
    case APP_E_PARSE:
        return "malformed input";
    case APP_E_GONE:
        return "process exited";
    case APP_E_STALE:
        return "torn read";
    case APP_E_IO:
        return "I/O error";
    case APP_E_VERSION:
        return "unsupported Python version";
    case APP_E_NOTPY:
        return "not a Python process";
    case APP_E_STARTING:
        return "interpreter starting up";
    case APP_E_EXITING:
        return "interpreter shutting down";
    case APP_E_ARCH:
        return "unsupported architecture";
    case APP_E_USAGE:
        return "usage error";
    case APP_E_LIMIT:
        return "limit reached";
    case APP_E_CANCELLED:
        return "cancelled";
    case APP_E_NOTREG:
        return "not a regular file";
    default:
        return "unknown error";
    }
}
