# bash completion for ranktop(1): commands, each command's flags, format and launcher names,
# files for file arguments and running pids for -p / --children-of. Installed to
# bash-completion's completionsdir; keep the flag lists in step with `ranktop CMD --help`
# (tests/e2e/install.sh checks that every flag of the help is here).

# shellcheck disable=SC2207 # COMPREPLY=($(compgen ...)): words without blanks, the usual form
_ranktop()
{
    local cur prev words cword
    if declare -F _init_completion > /dev/null; then
        _init_completion || return
    else
        cur=${COMP_WORDS[COMP_CWORD]}
        prev=${COMP_WORDS[COMP_CWORD - 1]}
        words=("${COMP_WORDS[@]}")
        cword=$COMP_CWORD
    fi

    local commands="demo ls dump record agent"
    local disc="-p --pid --children-of --match --nvidia-smi --npu-smi --nvidia-smi-file
        --npu-smi-file --tool-timeout --no-device-libs"
    local nodes="--hosts --hostfile --rsh --remote-ranktop --launcher --this-node"
    local monitor="-r --rate --hang-after --export-dir --history --all-threads -h --help
        $disc $nodes"
    local cmd="" i
    for ((i = 1; i < cword; i++)); do
        case ${words[i]} in
        demo | ls | dump | record | agent)
            cmd=${words[i]}
            break
            ;;
        esac
    done

    case $prev in
    -f | --format)
        COMPREPLY=($(compgen -W "chrome chrometrace speedscope collapsed raw flamegraph perfetto" -- "$cur"))
        return
        ;;
    --launcher)
        COMPREPLY=($(compgen -W "ssh srun pdsh" -- "$cur"))
        return
        ;;
    -p | --pid | --children-of)
        COMPREPLY=($(compgen -W "$(ps -e -o pid= 2> /dev/null)" -- "$cur"))
        return
        ;;
    -o | --output | --nvidia-smi-file | --npu-smi-file | --hostfile | --trigger-file | \
        --nvidia-smi | --npu-smi | --remote-ranktop)
        COMPREPLY=($(compgen -f -- "$cur"))
        return
        ;;
    --export-dir)
        COMPREPLY=($(compgen -d -- "$cur"))
        return
        ;;
    -r | --rate | -i | --interval | -d | --duration | --hang-after | --history | --match | \
        --tool-timeout | --hosts | --rsh | --autosave-interval | --autosave-snapshot-interval | \
        --memory-cap | --sampler-threads | --task-lanes | --max-frames | --heartbeat | --tick)
        return
        ;;
    esac

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
    dump) flags="-p --pid --ranks --native --async -j --json --max-frames -h --help $nodes" ;;
    record)
        flags="-o --output -i --interval -r --rate -d --duration -f --format --all-threads
            --gpu-usage --npu-usage --cpu-mem-usage --gil-stats --gil --idle --nonblocking
            --subprocesses --native --async --task-lanes --autosave-interval --autosave-snapshot-interval
            --trigger-file --history --memory-cap --sampler-threads -h --help $disc $nodes"
        ;;
    agent)
        flags="-r --rate --all-threads --no-gil --gil --no-mem --native --heartbeat --tick
            -h --help $disc"
        ;;
    esac
    COMPREPLY=($(compgen -W "$flags" -- "$cur"))
}
complete -F _ranktop ranktop
