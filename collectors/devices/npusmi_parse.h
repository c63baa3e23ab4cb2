/* Pure parsers for Huawei npu-smi output: buffer in, records out.
 *
 * Same contract as nvsmi_parse.h: results are appended to r (or written to dev), the outcome
 * goes to r->status / r->msg and err (may be NULL), the return is 0 or a negative app_status;
 * no I/O, no clock, no printing, buf need not be NUL-terminated. Cut-off or malformed data
 * lines are skipped and counted in r->skipped. Any thread; r is not shared. */
#ifndef RANKTOP_NPUSMI_PARSE_H
#define RANKTOP_NPUSMI_PARSE_H

#include <stddef.h>

#include "ranktop/devices/devices.h"
#include "ranktop/base/status.h"

/* `npu-smi info`, every layout from 20.x (310, "Chip Device") to 26.x ("Process id in
 * container"): one device record per chip (index = NPU card id, chip = chip within the card)
 * and one process record per process row. Device memory (mem_*) is HBM where the chip has it
 * (HBM total > 0), else Memory-Usage; both raw columns are kept in hbm_* and ddr_*. Rows
 * replaced by "..." and "No running processes found" rows are ignored. APP_E_PARSE when there
 * is no device table; APP_E_IO when the text is an npu-smi / DCMI failure message. */
int npusmi_parse_info(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

/* `npu-smi info -t usages -i N -c C`: "\t<name padded to 30> : <value>" lines. dev is in/out:
 * initialise it (smi_device_init, index, chip) before the call; "NPU ID" / "Chip ID" lines
 * fill index / chip only when they are unknown. Sets util_pct from "Aicore Usage Rate(%)",
 * hbm_total_mb from "HBM Capacity(MB)", hbm_used_mb from "HBM Usage Rate(%)" x capacity
 * (rounded to the MiB; the tool gives no exact figure), the same for DDR / "Memory", and
 * mem_* as in npusmi_parse_info. APP_E_PARSE when no known line is present or when the output
 * holds several chips (call it with -c). */
int npusmi_parse_usages(const char *buf, size_t len, struct smi_device *dev, struct app_err *err);

/* `npu-smi info -m`: one struct smi_chipmap per row (NPU ID, Chip ID, Chip Logic ID,
 * Chip Phy-ID when printed, Chip Name); "-" logic ids (the Mcu row) stay unknown. */
int npusmi_parse_mapping(const char *buf, size_t len, struct smi_result *r, struct app_err *err);

#endif
