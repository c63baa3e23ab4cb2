"""Makes every open() of the file argv[2] wait for good: a fanotify permission mark
(FAN_OPEN_PERM) that is never answered, as a file system that never answers would. Writes
its pid to argv[1] once the mark is set, and argv[1] + ".opened" with the opener's pid when
someone is waiting in open(). Exits 77 where fanotify permission events are not allowed
(they need CAP_SYS_ADMIN). The kernel allows the waiting open() once this process ends."""
import ctypes
import os
import struct
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from readyfile import write_ready  # noqa: E402

FAN_CLOEXEC = 0x1
FAN_CLASS_CONTENT = 0x4
FAN_MARK_ADD = 0x1
FAN_OPEN_PERM = 0x10000
AT_FDCWD = -100

libc = ctypes.CDLL(None, use_errno=True)
libc.fanotify_init.argtypes = [ctypes.c_uint, ctypes.c_uint]
libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                               ctypes.c_char_p]
fd = libc.fanotify_init(FAN_CLASS_CONTENT | FAN_CLOEXEC, os.O_RDONLY)
if fd < 0 or libc.fanotify_mark(fd, FAN_MARK_ADD, FAN_OPEN_PERM, AT_FDCWD,
                                sys.argv[2].encode()) < 0:
    print("fanotify: %s" % os.strerror(ctypes.get_errno()), file=sys.stderr)
    sys.exit(77)
write_ready(sys.argv[1])
while True:
    buf = os.read(fd, 4096)
    # struct fanotify_event_metadata: event_len, vers, reserved, metadata_len, mask, fd, pid
    _, _, _, _, _, efd, pid = struct.unpack_from("=IBBHQii", buf)
    if efd >= 0:
        os.close(efd)  # never answered: the opener waits
    with open(sys.argv[1] + ".opened.tmp", "w") as f:
        f.write("%d\n" % pid)
    os.rename(sys.argv[1] + ".opened.tmp", sys.argv[1] + ".opened")
    time.sleep(3600)
