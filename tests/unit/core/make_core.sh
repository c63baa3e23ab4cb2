#!/bin/sh
# Runs PROGRAM under qemu-user until it aborts and copies the core qemu writes for it (named
# qemu_PROG_DATE_PID.core, in the current directory) to OUT; writes PROGRAM's symbols (nm -S)
# to SYMS. Used by check_native_core's custom target:
#   make_core.sh QEMU PROGRAM OUT SYMS
# The guest stack is made small (-s) so that the core is about half a megabyte. qemu then dies
# of the same signal itself, and the host kernel may dump qemu too (by core_pattern): the
# small core limit and the scratch directory, removed afterwards, keep that from costing much
# or staying behind.
set -eu
qemu=$1 prog=$2 out=$3 syms=$4
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
prog_abs=$(cd "$(dirname "$prog")" && pwd)/$(basename "$prog")
# ulimit -c: not POSIX, but dash's and bash's (in 512- or 1024-byte blocks: 2 or 4 MiB).
# shellcheck disable=SC3045
(cd "$dir" && ulimit -c 4096 && exec "$qemu" -s 262144 "$prog_abs") >/dev/null 2>&1 || true
core=
for f in "$dir"/qemu_*.core; do
    [ -f "$f" ] && core=$f
done
[ -n "$core" ] || {
    echo "make_core.sh: qemu wrote no core for $prog (is the core size limit 0?)" >&2
    exit 1
}
cp "$core" "$out.tmp" && mv "$out.tmp" "$out"
nm -S --defined-only "$prog" >"$syms.tmp" && mv "$syms.tmp" "$syms"
