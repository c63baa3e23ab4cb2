"""Writes argv[1]: an ELF64 debug file whose .symtab claims argv[2] MiB (a sparse file of that
length, so the claim passes every bounds check and costs no disk): what a hostile debug file
offers to make a symbolizer read without bound. argv[3], when given, is the build id (hex) its
.note.gnu.build-id carries, so that it passes as the debug file of that object."""
import struct
import sys

path, mib = sys.argv[1], int(sys.argv[2])
build_id = bytes.fromhex(sys.argv[3]) if len(sys.argv) > 3 else b""
size = mib << 20
shstr = b"\0.symtab\0.strtab\0.shstrtab\0.note.gnu.build-id\0"
note = struct.pack("<III", 4, len(build_id), 3) + b"GNU\0" + build_id  # NT_GNU_BUILD_ID
strtab = b"\0huge_fn\0"
data_at = 4096
sh_at = 64


def shdr(name, typ, off, sz, link=0, entsize=0):
    return struct.pack("<IIQQQQIIQQ", name, typ, 0, 0, off, sz, link, 0, 8, entsize)


sections = [
    shdr(0, 0, 0, 0),
    shdr(1, 2, data_at + 4096, size, link=2, entsize=24),  # .symtab, SHT_SYMTAB
    shdr(9, 3, data_at, len(strtab)),  # .strtab
    shdr(17, 3, data_at + 1024, len(shstr)),  # .shstrtab
]
if build_id:
    sections.append(shdr(27, 7, data_at + 2048, len(note)))  # .note.gnu.build-id, SHT_NOTE
ehdr = (b"\x7fELF\x02\x01\x01" + b"\0" * 9 +
        struct.pack("<HHIQQQIHHHHHH", 3, 62, 1, 0, 0, sh_at, 0, 64, 56, 0, 64, len(sections), 3))
with open(path, "wb") as f:
    f.write(ehdr)
    f.seek(sh_at)
    f.write(b"".join(sections))
    f.seek(data_at)
    f.write(strtab)
    f.seek(data_at + 1024)
    f.write(shstr)
    f.seek(data_at + 2048)
    f.write(note)
    # A function symbol at the start, so that the table is worth reading; the rest is holes.
    f.seek(data_at + 4096)
    f.write(struct.pack("<IBBHQQ", 1, 0x12, 0, 1, 0x1000, 16))
    f.truncate(data_at + 4096 + size)
