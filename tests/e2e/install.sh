#!/bin/sh
# `meson install` works without the checkout: a copy of the source tree is configured with a
# prefix that never exists, built, installed with --destdir, the installed tree is moved
# elsewhere and the copy and its build are deleted. The installed binary then has only its
# own tree: `ranktop demo` must find the installed demo_job.py (from the binary's place),
# --help and -V answer, `man -l` renders ranktop(1) with its sections, every flag and every
# key the monitor binds, and the bash and zsh completions exist, parse, complete and know every
# flag of every --help.
. "$(dirname "$0")/../ui/lib.sh"
unset RANKTOP_DATADIR

command -v man > /dev/null || fail "man (man-db) is not installed"

# The checkout's files as they are now (copy_checkout).
mkdir "$WORK/src"
copy_checkout "$WORK/src" || fail "cannot copy the checkout"
cd "$WORK" || fail "no $WORK"
[ -f "$WORK/src/meson.build" ] && [ -f "$WORK/src/data/demo_job.py" ] || fail "incomplete copy"

NEVER="$WORK/never-there" # the configured prefix: nothing is ever put there
meson setup "$WORK/build" "$WORK/src" --prefix="$NEVER" -Dtests=false -Dbench=false \
    -Dman=enabled > "$WORK/setup.log" 2>&1 || fail "meson setup: $(tail -20 "$WORK/setup.log")"
ninja -C "$WORK/build" > "$WORK/build.log" 2>&1 || fail "build: $(tail -30 "$WORK/build.log")"
DESTDIR="$WORK/dest" meson install -C "$WORK/build" --no-rebuild > "$WORK/install.log" 2>&1 ||
    fail "meson install: $(tail -20 "$WORK/install.log")"
INST="$WORK/moved"
mv "$WORK/dest$NEVER" "$INST"
rm -rf "$WORK/src" "$WORK/build" "$WORK/dest"
[ ! -e "$NEVER" ] || fail "the install wrote into its prefix despite --destdir"

# What is installed, where.
for f in bin/ranktop share/ranktop/demo_job.py share/ranktop/waits.rules share/man/man1/ranktop.1 \
    share/bash-completion/completions/ranktop share/zsh/site-functions/_ranktop \
    share/doc/ranktop/LICENSE; do
    [ -f "$INST/$f" ] || fail "not installed: $f (installed: $(cd "$INST" && find . -type f))"
done
grep -q '^MIT License' "$INST/share/doc/ranktop/LICENSE" || fail "LICENSE is not the MIT text"
# shellcheck disable=SC2034 # app_pid (ui/lib.sh) looks for this name
RANKTOP_BIN="$INST/bin/ranktop"
R="$INST/bin/ranktop"

# --help lists the commands, -V and the exit statuses; -V prints the version.
"$R" --help > "$WORK/help.txt" || fail "--help exited $?"
for w in 'commands:' '^  demo ' '^  ls ' '^  dump ' '^  record ' '^  agent ' '-V, --version' \
    'Exit status' '2 a usage error'; do
    grep -Eq -- "$w" "$WORK/help.txt" || fail "--help lacks '$w': $(cat "$WORK/help.txt")"
done
"$R" -V | grep -Eqx 'ranktop [0-9]+\.[0-9]+\.[0-9]+(-[0-9]+-g[0-9a-f]+)?(-dirty)?' || fail "-V: $("$R" -V)"

# The man page renders, with its sections, and names every flag of every command's --help.
MANWIDTH=250 man --nh --nj -l "$INST/share/man/man1/ranktop.1" > "$WORK/man.txt" 2> "$WORK/man.err" ||
    fail "man -l: $(cat "$WORK/man.err")"
for s in NAME SYNOPSIS DESCRIPTION KEYS 'EXIT STATUS' ENVIRONMENT 'JSON OUTPUT' 'ranktop record' \
    'ranktop dump' 'ranktop ls' 'ranktop agent' 'ls --json' 'dump --json'; do
    grep -q "^ *$s$" "$WORK/man.txt" || fail "the man page has no section '$s'"
done
[ ! -s "$WORK/man.err" ] || fail "man -l warned: $(cat "$WORK/man.err")"
# Every key the monitor binds (the code lists of ui/keys.c's one key table, and the E prompt's
# format letters) is a term of the man page's KEYS section, and KEYS names no key it lacks.
python3 "$RANKTOP_SRCDIR/tests/tools/keys_check.py" "$RANKTOP_SRCDIR/ui/keys.c" "$WORK/man.txt" \
    > "$WORK/keys.txt" 2>&1 || fail "man page KEYS vs ui/keys.c: $(cat "$WORK/keys.txt")"

# help_flags CMD: the flags a command's --help lists (the first column of its option lines).
help_flags() {
    # shellcheck disable=SC2086
    "$R" $1 --help | grep -E '^ +-' | sed -E 's/^ +//; s/  .*//' |
        grep -Eo -- '(^|, )--?[a-zA-Z][a-zA-Z0-9-]*' | sed 's/^, //' | sort -u
}
for cmd in "" demo ls dump record watch agent; do
    help_flags "$cmd" > "$WORK/flags.txt"
    [ -s "$WORK/flags.txt" ] || fail "no flags in 'ranktop $cmd --help'"
    while read -r f; do
        grep -Eq -- "(^|[^a-z-])$f([^a-z-]|$)" "$WORK/man.txt" || fail "man page lacks $f ($cmd)"
        grep -Eq -- "(^|[^a-z-])$f([^a-z-]|$)" "$INST/share/bash-completion/completions/ranktop" ||
            fail "bash completion lacks $f ($cmd)"
        grep -Eq -- "(^|[^a-z-])$f([^a-z-]|$)" "$INST/share/zsh/site-functions/_ranktop" ||
            fail "zsh completion lacks $f ($cmd)"
    done < "$WORK/flags.txt"
done

# Completion: bash and zsh parse theirs and complete commands, flags and format names.
BC="$INST/share/bash-completion/completions/ranktop"
bash -n "$BC" || fail "bash -n rejects the bash completion"
# complete WORD...: what the bash completion offers for the last word.
complete_words() {
    bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
        _ranktop; printf "%s\n" "${COMPREPLY[@]}"' sh "$BC" "$@"
}
[ "$(complete_words ranktop rec)" = record ] || fail "bash: 'ranktop rec' -> $(complete_words ranktop rec)"
complete_words ranktop record --form | grep -qx -- --format || fail "bash: no --format"
[ "$(complete_words ranktop record -f spe)" = speedscope ] || fail "bash: -f spe"
complete_words ranktop record --format ra | grep -qx raw || fail "bash: --format ra"
complete_words ranktop ls --j | grep -qx -- --json || fail "bash: ls --j"
head -n 1 "$INST/share/zsh/site-functions/_ranktop" | grep -qx '#compdef ranktop' ||
    fail "the zsh completion is not a compdef file"
command -v zsh > /dev/null || fail "zsh is not installed (tests/bootstrap.sh installs it)"
zsh -n "$INST/share/zsh/site-functions/_ranktop" || fail "zsh -n rejects the zsh completion"
# zcomplete LINE: what zsh offers for LINE, one word a line, from the installed _ranktop.
zcomplete() {
    timeout 60 zsh -f "$RANKTOP_SRCDIR/tests/tools/zsh_complete.zsh" \
        "$INST/share/zsh/site-functions" "$1" | tr '\n' ' '
}
[ "$(zcomplete 'ranktop rec')" = "record " ] || fail "zsh: 'ranktop rec' -> $(zcomplete 'ranktop rec')"
[ "$(zcomplete 'ranktop record --form')" = "--format " ] || fail "zsh: record --form"
[ "$(zcomplete 'ranktop record -f ')" = "chrome chrometrace collapsed flamegraph perfetto raw speedscope " ] ||
    fail "zsh: record -f -> $(zcomplete 'ranktop record -f ')"
[ "$(zcomplete 'ranktop ls --j')" = "--json " ] || fail "zsh: ls --j -> $(zcomplete 'ranktop ls --j')"

# demo without its data (a binary copied alone): the built-in copy of the demo job, written
# into the demo's private directory, runs the four ranks; q removes that directory.
ui_start nodata 160 45 RANKTOP_DATADIR="$WORK/nothing" -- "$R" demo
wait_screen '^ +RANK +PID ' 60 || fail "demo without its data files did not start"
APP=$(app_pid)
builtin_ranks() {
    BUILTIN=$(pgrep -P "$APP" -f 'ranktop-demo-[^ ]*/demo_job.py' | wc -l)
    [ "$BUILTIN" -eq 4 ]
}
wait_for builtin_ranks || fail "expected 4 ranks of the built-in demo job: $(pgrep -a -P "$APP")"
DEMODIR=$(tr '\0' '\n' < "/proc/$(pgrep -P "$APP" -f demo_job.py | head -n 1)/cmdline" |
    grep 'demo_job.py$' | sed 's|/demo_job.py$||')
cmp "$DEMODIR/demo_job.py" "$RANKTOP_SRCDIR/data/demo_job.py" ||
    fail "the built-in demo job differs from data/demo_job.py"
wait_screen 'demo_job\.py' 60 || fail "no demo_job.py frame from the built-in demo job"
keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit the demo of the built-in job with status 0"
[ ! -e "$DEMODIR" ] || fail "the demo left $DEMODIR behind"

# demo from the installed tree: its four ranks run the installed demo_job.py.
ui_start demo 160 45 -- "$R" demo
wait_screen '^ +RANK +PID ' 60 || fail "the installed ranktop demo did not draw its rank table"
APP=$(app_pid)
[ -n "$APP" ] || fail "the installed ranktop is not running"
installed_ranks() {
    n=0
    for p in $(pgrep -P "$APP" -f demo_job.py); do
        tr '\0' ' ' < "/proc/$p/cmdline" | grep -qF "$INST/share/ranktop/demo_job.py" && n=$((n + 1))
    done
    [ $n -eq 4 ]
}
wait_for installed_ranks ||
    fail "expected 4 ranks running $INST/share/ranktop/demo_job.py: $(pgrep -a -P "$APP")"
wait_screen 'demo_job\.py' 60 || fail "no demo_job.py frame on the screen"
keys q
wait_screen '^EXITED 0$' 20 || fail "q did not exit the installed ranktop with status 0"
echo ok
