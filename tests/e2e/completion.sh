#!/bin/sh
# Shell completion against the binary (doc/completion/): for every command, bash and zsh offer
# exactly the long options ranktop accepts (read from getopt_long by tools/help_check.py), and
# bash completes a flag's value after an '=' as after a blank: formats, launchers, files,
# directories, pids. bash is driven twice: its function called with COMP_WORDS as bash splits
# such a line ('=' in COMP_WORDBREAKS: "--format" "=" "sp"; and without: "--format=sp"), and
# an interactive bash in tmux completing typed lines with Tab.
# shellcheck disable=SC2016 # the bash -c scripts expand their own variables
. "$(dirname "$0")/../ui/lib.sh"

BC="$RANKTOP_SRCDIR/doc/completion/ranktop.bash"
ZDIR="$RANKTOP_SRCDIR/doc/completion"
command -v zsh > /dev/null || fail "zsh is not installed (tests/bootstrap.sh installs it)"

# complete_words WORD...: what the bash completion offers for the last word, one a line, sorted.
complete_words() {
    bash --norc --noprofile -c '. "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1))
        _ranktop; printf "%s\n" "${COMPREPLY[@]}"' sh "$BC" "$@" | sort
}
# zcomplete LINE: what zsh offers for LINE, one a line, sorted.
zcomplete() {
    timeout 60 zsh -f "$RANKTOP_SRCDIR/tests/tools/zsh_complete.zsh" "$ZDIR" "$1"
}
# is WANT CMD...: CMD's output, its lines joined by blanks, is WANT.
is() {
    is_want=$1
    shift
    is_got=$("$@" | tr '\n' ' ' | sed 's/ $//')
    [ "$is_got" = "$is_want" ] || fail "$*: '$is_got', expected '$is_want'"
}

# 1. Every long option of every command, no more: bash and zsh against getopt.
for cmd in "" demo ls dump record watch agent; do
    python3 "$RANKTOP_SRCDIR/tests/tools/help_check.py" "$RANKTOP_BIN" longs "$cmd" |
        sed 's/^/--/' > "$WORK/accepted"
    [ -n "$cmd" ] || echo --version >> "$WORK/accepted" # main's own, not the monitor's getopt
    sort -o "$WORK/accepted" "$WORK/accepted"
    [ "$(wc -l < "$WORK/accepted")" -ge 10 ] || fail "too few options read for '$cmd'"
    # shellcheck disable=SC2086 # no command: no word
    complete_words ranktop $cmd -- > "$WORK/bash"
    cmp -s "$WORK/accepted" "$WORK/bash" ||
        fail "bash 'ranktop $cmd --': $(diff "$WORK/accepted" "$WORK/bash" | grep '^[<>]' | tr '\n' ' ')"
    zcomplete "ranktop ${cmd:+$cmd }--" > "$WORK/zsh"
    cmp -s "$WORK/accepted" "$WORK/zsh" ||
        fail "zsh 'ranktop $cmd --': $(diff "$WORK/accepted" "$WORK/zsh" | grep '^[<>]' | tr '\n' ' ')"
done

# 2. Values after '=', as bash splits the line ("--format" "=" "sp"; the cursor on the "="
# when nothing follows it), and as one word when '=' breaks no word.
FORMATS="chrome chrometrace collapsed flamegraph perfetto raw speedscope"
is "$FORMATS" complete_words ranktop record --format =
is "$FORMATS" complete_words ranktop record --format ""
is "speedscope" complete_words ranktop record --format = sp
is "speedscope" complete_words ranktop record -f sp
is "--format=raw" complete_words ranktop record --format=ra
is "pdsh" complete_words ranktop ls --launcher = pd
is "kubectl" complete_words ranktop ls --launcher ku
is "1 2 3 4" complete_words ranktop record --sampler-threads =
mkdir -p "$WORK/dir/sub.d"
: > "$WORK/dir/trace.json"
is "$WORK/dir/trace.json" complete_words ranktop record --output = "$WORK/dir/tr"
is "$WORK/dir/trace.json" complete_words ranktop record -o "$WORK/dir/tr"
is "--output=$WORK/dir/trace.json" complete_words ranktop record "--output=$WORK/dir/tr"
is "$WORK/dir/trace.json" complete_words ranktop ls --nvidia-smi-file = "$WORK/dir/tr"
is "$WORK/dir/sub.d" complete_words ranktop --export-dir = "$WORK/dir/"
complete_words ranktop record --children-of = "$$" | grep -qx "$$" || fail "bash: --children-of=PID"
is "" complete_words ranktop record --rate = 1
# A flag after the value: flags again.
complete_words ranktop record --format = raw --all | grep -qx -- --all-threads ||
    fail "bash: no flags after --format=raw"

# 3. Through readline: an interactive bash in tmux, Tab after '='.
cat > "$WORK/bashrc" << EOF
PS1='$ '
. "$BC"
EOF
ui_start bash 150 10 -- bash --noprofile --rcfile "$WORK/bashrc" -i
wait_screen '^\$' 20 || fail "no bash prompt"
type_text "ranktop record --format=spe"
keys Tab
wait_screen '^\$ ranktop record --format=speedscope( |$)' 20 || fail "bash: Tab after --format=spe"
keys C-u
type_text "ranktop record --output=$WORK/dir/tra"
keys Tab
wait_screen "^\\\$ ranktop record --output=$WORK/dir/trace\\.json" 20 ||
    fail "bash: Tab after --output="
echo ok
