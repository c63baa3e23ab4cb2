/* NVIDIA GPUs through NVML, loaded at run time with dlopen (no build-time dependency).
 *
 * One struct nvml holds the loaded library and one nvmlInit; it belongs to one thread at a
 * time (NVML itself is thread-safe, the handle's scratch buffers are not). Records go into a
 * struct smi_result with the same meaning and validity bits as the nvidia-smi parsers give,
 * so callers can use either source. */
#ifndef RANKTOP_NVML_H
#define RANKTOP_NVML_H

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"

struct nvml;

/* Loads libnvidia-ml.so.1 (or the file named by $RANKTOP_NVML_LIB) and calls nvmlInit once.
 * On success *out is a new handle the caller frees with nvml_close. Returns APP_E_NOTFOUND
 * when the library is absent or lacks a required symbol, APP_E_PERM for NVML's "no
 * permission", APP_E_IO for the other failures (driver not loaded, driver/library mismatch),
 * always with a one-line message in err. Any thread. */
int nvml_open(struct nvml **out, struct app_err *err);

/* Appends one SMI_KIND_GPU record per GPU (index, name, uuid, bus id, util %, memory used and
 * total MiB, power W, temperature C) and one record per compute process (pid, GPU index, MiB,
 * MIG gi/ci, the GPU's uuid and bus id) to r. A value NVML cannot give (not supported,
 * N/A under WDDM, GPU utilisation under MIG) leaves its validity bit clear. A GPU whose
 * handle or process list cannot be read is kept with what is known and noted in r->msg.
 * Returns 0, or a negative app_status when the GPUs cannot even be counted (also in
 * r->status / r->msg and err). The thread owning n. */
int nvml_collect(struct nvml *n, struct smi_result *r, struct app_err *err);

/* The file that was loaded (borrowed, valid until nvml_close). */
const char *nvml_path(const struct nvml *n);

/* nvmlShutdown, dlclose, free. NULL is a no-op. */
void nvml_close(struct nvml *n);

#endif
