/* Huawei Ascend NPUs through DCMI (libdcmi.so), loaded at run time with dlopen.
 *
 * One struct dcmi holds the loaded library, the chip list found at open and, per chip, which
 * calls the chip does not support. Every call into libdcmi is serialised behind one mutex of
 * this module (its thread safety is not documented), so handles may live in different threads;
 * one handle belongs to one thread at a time. Records go into a struct smi_result with the
 * meaning and validity bits the npu-smi parser gives. */
#ifndef RANKTOP_DCMI_H
#define RANKTOP_DCMI_H

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"

struct dcmi;

/* Loads libdcmi.so from $RANKTOP_DCMI_LIB, else from $ASCEND_DRIVER_HOME, $ASCEND_INSTALL_PATH
 * or $ASCEND_HOME_PATH (lib64/driver/, lib64/), /usr/local/Ascend/driver/lib64/{driver/,},
 * /usr/local/dcmi/ and the loader's path; calls dcmi_init and lists the cards and chips. On
 * success *out is a new handle the caller frees with dcmi_close. Returns APP_E_NOTFOUND when
 * no library is found or it lacks a required symbol, APP_E_PERM when DCMI refuses permission,
 * APP_E_IO otherwise, always with a one-line message in err. Any thread. */
int dcmi_open(struct dcmi **out, struct app_err *err);

/* Appends one SMI_KIND_NPU record per chip (card id as index, chip, logic and physical id,
 * name, health, AICore %, HBM or else DDR memory in MiB, power W, temperature C) and one record
 * per process on it (pid, card, chip, MiB; the name stays unknown: DCMI has none) to r. A call
 * answering "not supported" (-8255) leaves its field unknown and is not asked again for that
 * chip. Returns 0; failures of single chips are noted in r->msg. The thread owning d. */
int dcmi_collect(struct dcmi *d, struct smi_result *r, struct app_err *err);

/* The file that was loaded (borrowed, valid until dcmi_close). */
const char *dcmi_path(const struct dcmi *d);

/* Frees the handle. The library stays mapped (DCMI has no shutdown). NULL is a no-op. */
void dcmi_close(struct dcmi *d);

#endif
