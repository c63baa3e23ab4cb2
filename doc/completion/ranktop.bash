# bash completion for ranktop(1): commands, each command's flags, format and launcher names,
# files for file arguments and running pids for -p / --children-of, for a value given as the
# next word or after an '=' (--format=sp, -o FILE or --output=FILE). Installed to
# bash-completion's completionsdir; keep the flag lists in step with `ranktop CMD --help`
# (tests/e2e/install.sh checks that every flag of the help is here, tests/e2e/completion.sh
# that every option the binary accepts is offered).

# shellcheck disable=SC2207 # COMPREPLY=($(compgen ...)): words without blanks, the usual form
_ranktop()
{
    # shellcheck disable=SC2034 # split: set by _init_completion -s
    local cur prev words cword split
    if declare -F _init_completion > /dev/null; then
        # -s: "--format=sp" (or "--format" "=" "sp") becomes prev=--format, cur=sp.
        _init_completion -s || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
        # '=' breaks words (COMP_WORDBREAKS): "--format=sp" arrives as "--format" "=" "sp", and
        # "--format=" as "--format" "=" with the cursor on the "=" (the value is empty).
        if [[ $cur == = ]]; then
            cur=""
        elif [[ $prev == = && $cword -ge 2 ]]; then
            prev=${words[cword - 2]}
        fi
    fi
    # "--format=sp" as one word (an '=' that breaks no word): complete the value; the reply
    # then keeps "--format=" in front, since the whole word is replaced.
    local eq=""
    if [[ $cur == --?*=* ]]; then
        prev=${cur%%=*}
        eq="$prev="
        cur=${cur#*=}
    fi

    local commands="demo ls dump record watch agent"
    local disc="-p --pid --children-of --match --nvidia-smi --npu-smi --nvidia-smi-file
        --npu-smi-file --tool-timeout --no-device-libs"
    local nodes="--hosts --hostfile --rsh --remote-ranktop --launcher --this-node --selector
        -n --namespace --container --ship --ship-dir"
    local monitor="-r --rate --hang-after --export-dir --history --all-threads --full-filenames
        -s --subprocesses -g --gil -F --function --nolineno --waits -h --help $disc $nodes"
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        demo | ls | dump | record | watch | agent)
            cmd=${words[i]}
            break
            ;;
        esac
    done

    case $prev in
    -f | --format)
        COMPREPLY=($(compgen -W "chrome chrometrace speedscope collapsed raw flamegraph perfetto" -- "$cur"))
        ;;
    --launcher)
        COMPREPLY=($(compgen -W "ssh srun pdsh kubectl" -- "$cur"))
        ;;
    --sampler-threads)
        COMPREPLY=($(compgen -W "1 2 3 4" -- "$cur"))
        ;;
    -p | --pid | --children-of)
        COMPREPLY=($(compgen -W "$(ps -e -o pid= 2> /dev/null)" -- "$cur"))
        ;;
    -o | --output | --nvidia-smi-file | --npu-smi-file | --hostfile | --trigger-file | \
        --nvidia-smi | --npu-smi | --remote-ranktop | --core | --exe | --waits)
        COMPREPLY=($(compgen -f -- "$cur"))
        ;;
    --export-dir | --ship-dir | --lib-search | --out)
        COMPREPLY=($(compgen -d -- "$cur"))
        ;;
    -r | --rate | -i | --interval | -d | --duration | --hang-after | --history | --match | \
        --tool-timeout | --hosts | --rsh | --selector | -n | --namespace | --container | \
        --autosave-interval | --autosave-snapshot-interval | --memory-cap | --task-lanes | --max-frames | --heartbeat | --tick | \
        --window | --on-hang | --on-hang-timeout | --max-reports | --slow-after | --dump-timeout)
        COMPREPLY=()
        ;;
    *)
        prev=""
        ;;
    esac
    if [[ $prev ]]; then # a flag's value: its reply as the whole word when '=' broke none
        [[ $eq ]] && COMPREPLY=("${COMPREPLY[@]/#/$eq}")
        return
    fi

    local flags
    case $cmd in
    "")
        flags="$monitor -V --version"
        if [[ $cur != -* ]]; then
            COMPREPLY=($(compgen -W "$commands" -- "$cur"))
            return
        fi
        ;;
    demo) flags=$monitor ;;
    ls) flags="-j --json -h --help $disc $nodes" ;;
    dump)
        flags="--ranks -s --subprocesses -t --threads --full-filenames --native --native-all --async --core --exe
            --lib-search --locals -j --json --max-frames --waits -h --help $disc $nodes"
        ;;
    record)
        flags="-o --output -i --interval -r --rate -d --duration -f --format --all-threads
            --gpu-usage --npu-usage --cpu-mem-usage --gil-stats -g --gil --idle --oncpu --nonblocking
            -s --subprocesses -F --function --nolineno -t --threads --full-filenames --native --async --task-lanes --autosave-interval --autosave-snapshot-interval
            --trigger-file --history --memory-cap --sampler-threads --waits -h --help $disc $nodes"
        ;;
    watch)
        flags="--out --hang-after --window -r --rate --on-hang --on-hang-timeout --exit-on-hang
            --max-reports --slow-after --waits --gil-stats --dump-timeout -h --help $disc $nodes"
        ;;
    agent)
        flags="-r --rate --all-threads --no-gil --gil --oncpu --no-mem --native --heartbeat --tick
            -h --help $disc"
        ;;
    esac
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}
complete -F _ranktop ranktop
