/* Pure parsers for nvidia-smi output: buffer in, records out.
 *
 * Every function appends what it finds to r (call smi_result_reset first for a fresh parse),
 * records its outcome in r->status / r->msg and in err (which may be NULL), and returns 0 or a
 * negative app_status. No I/O, no clock, no printing; buf need not be NUL-terminated. Lines
 * that are recognised as data but cut short or malformed are skipped and counted in
 * r->skipped (a sane partial result); output that is not the expected form at all is
 * APP_E_PARSE. nvidia-smi's own failure messages become APP_E_IO ("couldn't communicate with
 * the NVIDIA driver", "Failed to initialize NVML"), APP_E_NOTFOUND ("No devices were found")
 * or APP_E_PERM ("Insufficient Permissions"). Any thread; r is not shared. */
#ifndef RANKTOP_NVSMI_PARSE_H
#define RANKTOP_NVSMI_PARSE_H

#include <stddef.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"

/* `--query-gpu=index,uuid,name,utilization.gpu,memory.used,memory.total,power.draw
 * [,temperature.gpu] --format=csv[,noheader][,nounits]`. With a header line, columns are
 * located by name (any other query fields are ignored); without one, that order is assumed. */
int nvsmi_parse_query_gpu(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

/* `--query-compute-apps=pid,process_name,used_memory,gpu_uuid --format=csv[,noheader]
 * [,nounits]`. Located by header names when present (gpu_bus_id is kept too). The records'
 * dev_index stays unknown: the caller joins gpu_uuid to a device. No rows is success. */
int nvsmi_parse_query_apps(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

/* The default `nvidia-smi` table, drivers 390 to 610: devices from the GPU table, processes
 * from the Processes table (the MIG devices table is skipped). Columns are located from the
 * header rows. */
int nvsmi_parse_table(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

/* `nvidia-smi pmon -c N`: one record per (gpu, pid), the last sample winning; sm_pct and
 * memutil_pct ("-" is unknown), mem_mb from an "fb" column when the driver prints one. */
int nvsmi_parse_pmon(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

/* Recognises nvidia-smi's failure messages anywhere in buf. Returns the negative status (and
 * fills r and err) for one of them, 0 when buf holds none. The parsers above call it. */
int nvsmi_parse_error(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

#endif
