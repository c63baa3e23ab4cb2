#!/bin/sh
# embed.sh NAME INPUT OUTPUT: writes OUTPUT, a C file defining `const unsigned char NAME[]`
# (INPUT's bytes, NUL-terminated) and `const size_t NAME_len`, so that a binary copied alone
# still has the file. Only POSIX od and sed: the portable build runs it inside a Debian 11 chroot.
set -eu
{
    echo "/* Generated from $(basename "$2") by data/embed.sh; do not edit. */"
    echo "#include <stddef.h>"
    echo "const unsigned char $1[] = {"
    od -An -v -tx1 "$2" | sed -e 's/ *$//' -e 's/  */, 0x/g' -e 's/^, //' -e 's/$/,/'
    echo "0x00};"
    echo "const size_t $1_len = sizeof($1) - 1;"
} >"$3.tmp"
mv "$3.tmp" "$3"
