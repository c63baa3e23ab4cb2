# zsh -f zsh_complete.zsh DIR LINE: prints what zsh's completion system offers for LINE (one
# word a line, sorted), with the completion functions of DIR first on fpath. Runs an
# interactive zsh on a pseudo-terminal (zpty), wraps compadd to print each match, types LINE
# and a Tab, waits for the first match, then clears the line and prints a marker: reading up
# to the marker's output (not its echo) takes everything the Tab printed, whatever the timing.
zmodload zsh/zpty || exit 2
dir=$1 line=$2
zpty z zsh -f -i
zpty -w z "PROMPT='>'; fpath=(${(q)dir} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z 'compadd () { local -a h; builtin compadd -O h "$@"; print -rl -- "" "${(@)h/#/HIT:}"; builtin compadd "$@" }'
zpty -w z 'print -- SETUP-${:-DONE}'
zpty -r z out '*SETUP-DONE*'
# The Tab goes alone and the rest only once a match was printed: typed-ahead input can make
# ZLE skip a completion that is still loading (seen on a loaded machine). A LINE with no match
# therefore never ends; the caller's timeout says so.
zpty -w -n z "$line"$'\t'
zpty -r z first '*HIT:*'
zpty -w -n z $'\C-u''print -- END-${:-MARK}'$'\n'
zpty -r z out '*END-MARK*'
zpty -d z
print -r -- "$first$out" | tr -d '\r' | sed -n 's/^HIT://p' | sort -u
