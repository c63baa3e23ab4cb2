# zsh -f zsh_complete.zsh DIR LINE: prints what zsh's completion system offers for LINE (one
# word a line, sorted), with the completion functions of DIR first on fpath. Runs an
# interactive zsh on a pseudo-terminal (zpty), wraps compadd to print each match, types LINE
# and a Tab, then clears the line and prints a marker: reading up to the marker's output
# (not its echo) takes everything the Tab printed, whatever the timing.
zmodload zsh/zpty || exit 2
dir=$1 line=$2
zpty z zsh -f -i
zpty -w z "PROMPT='>'; fpath=(${(q)dir} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd () { local -a h; builtin compadd -O h "$@"; print -rl -- "" "${(@)h/#/HIT:}"; builtin compadd "$@" }'
zpty -w z 'print -- SETUP-${:-DONE}'
zpty -r z out '*SETUP-DONE*'
zpty -w -n z "$line"$'\t\C-u''print -- END-${:-MARK}'$'\n'
zpty -r z out '*END-MARK*'
zpty -d z
print -r -- "$out" | tr -d '\r' | sed -n 's/^HIT://p' | sort -u
