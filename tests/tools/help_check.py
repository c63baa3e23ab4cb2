#!/usr/bin/env python3
"""What a command's getopt accepts, and whether its --help says all of it, aligned.

help_check.py BIN longs CMD   prints the long options `ranktop CMD` accepts, one a line
help_check.py BIN check SRC   checks every command's --help; exits 1 with the reasons

The accepted options are read from the real binary, not from its tables: glibc's getopt_long
answers a one-letter prefix `--a` with every option it could mean ("is ambiguous;
possibilities: '--all-threads' '--async'"), with the one option it means ("'--all-threads'
doesn't allow an argument", or, without a value, "requires an argument"), or with "unrecognized
option". Each probe ends with an option no command has, so that nothing ever runs: the command
stops at the first bad option (exit 2).
"""
import re
import string
import subprocess
import sys

COMMANDS = ["", "demo", "ls", "dump", "record", "watch", "agent"]
BOGUS = "--zz-no-such-option"


def run(binary, cmd, *args):
    argv = [binary] + ([cmd] if cmd else []) + list(args)
    p = subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    return p.returncode, p.stdout, p.stderr


def probe(binary, cmd, letter):
    """The long options starting with letter that `ranktop CMD` accepts."""
    rc, _, err = run(binary, cmd, "--%s=zz" % letter, BOGUS)
    if rc != 2:
        raise SystemExit("probe %r --%s=zz exited %d, not 2: %s" % (cmd, letter, rc, err))
    m = re.search(r"option '--%s=zz' is ambiguous; possibilities:(.*)" % letter, err)
    if m:
        return set(re.findall(r"'--([a-z0-9-]+)'", m.group(1)))
    if "unrecognized option '--%s=zz'" % letter in err:
        return set()
    m = re.search(r"option '--([a-z0-9-]+)' doesn't allow an argument", err)
    if m:
        return {m.group(1)}
    # An option with a value took "zz" (and stopped at BOGUS or at the value): ask again
    # without a value, which getopt refuses naming the option.
    rc, _, err = run(binary, cmd, "--%s" % letter)
    m = re.search(r"option '--([a-z0-9-]+)' requires an argument", err)
    if rc != 2 or not m:
        raise SystemExit("probe %r --%s: cannot tell the option (exit %d): %s"
                         % (cmd, letter, rc, err))
    return {m.group(1)}


def accepted(binary, cmd):
    names = set()
    for letter in string.ascii_lowercase:
        names |= probe(binary, cmd, letter)
    return names


# "  -o, --output FILE     where to write" or "      --all-threads ..." (the description may
# be on the next lines); in ranktop --help also "  record -o FILE [options]   record ...".
OPT_ROW = re.compile(r"^(?:  -[a-zA-Z0-9], |      )--([a-z0-9-]+)(?: [^ ]+)?(?: {2,}(\S.*))?$")
CMD_ROW = re.compile(r"^  (?:demo|ls|dump|record|watch|agent)\b.*? {2,}(\S.*)$")


def help_lines(binary, cmd):
    rc, out, err = run(binary, cmd, "--help")
    if rc != 0 or err:
        raise SystemExit("%r --help exited %d: %s" % (cmd, rc, err))
    return out.splitlines()


def check_help(binary, cmd, problems):
    """The options --help lists; problems gets every description out of the column."""
    lines = help_lines(binary, cmd)
    listed, cols, after_row = set(), [], False
    for line in lines:
        if len(line) > 79:
            problems.append("'ranktop %s --help': a line of %d characters (80 columns at most, "
                            "the last one free): '%s'" % (cmd, len(line), line[:50]))
    for line in lines[lines.index(""):]:  # the usage lines above the first blank one are free
        m = OPT_ROW.match(line) or CMD_ROW.match(line)
        if m:
            if m.re is OPT_ROW:
                listed.add(m.group(1))
            desc = m.group(m.re.groups)
            if desc:
                cols.append((len(line) - len(desc), line))
            after_row = True
            continue
        indent = len(line) - len(line.lstrip(" "))
        if after_row and line.strip() and indent > 2:
            cols.append((indent, line))  # a description's next line
            if line.lstrip().startswith("-"):
                problems.append("'ranktop %s --help': a description's line starts with a dash, "
                                "as an option would: '%s'" % (cmd, line.strip()[:50]))
            continue
        after_row = False
    for col, line in cols:
        if col != cols[0][0]:
            problems.append("'ranktop %s --help': '%s' describes from column %d, not %d"
                            % (cmd, line.strip()[:50], col, cols[0][0]))
    return listed


def export_words(src):
    """Every format name and file suffix the exporter's source accepts."""
    text = open(src + "/src/export/export.c").read()
    names = set(re.findall(r'\{"([a-z]+)",\s*EXPORT_', text))
    names |= set(re.findall(r'strcmp\(name, "([a-z]+)"\)', text))
    suffixes = set(re.findall(r'\{"(\.[a-z.-]+)",\s*EXPORT_', text))
    if len(names) < 5 or len(suffixes) < 5:
        raise SystemExit("found too few formats in export.c: %s %s" % (names, suffixes))
    return names, suffixes | {".gz"}


def check(binary, src):
    problems = []
    for cmd in COMMANDS:
        listed = check_help(binary, cmd, problems)
        got = accepted(binary, cmd)
        if cmd == "":
            listed.discard("version")  # main's own word, not the monitor's getopt
        for name in sorted(got - listed):
            problems.append("'ranktop %s' accepts --%s, which its --help does not list"
                            % (cmd, name))
        for name in sorted(listed - got):
            problems.append("'ranktop %s --help' lists --%s, which it does not accept"
                            % (cmd, name))
    text = "\n".join(help_lines(binary, "record"))
    names, suffixes = export_words(src)
    for w in sorted(names | suffixes):
        if not re.search(r"(^|[^a-z.-])\*?%s([^a-z-]|$)" % re.escape(w), text, re.M):
            problems.append("record --help does not name the exporter's %s" % w)
    for w in sorted(names):
        rc, _, err = run(binary, "record", "-f", w, BOGUS)
        if "unknown --format" in err:
            problems.append("record -f %s is refused: %s" % (w, err.strip()))
    for p in problems:
        print("FAIL:", p)
    return 1 if problems else 0


def main():
    binary, mode, arg = sys.argv[1:4]
    if mode == "longs":
        print("\n".join(sorted(accepted(binary, arg))))
        return 0
    return check(binary, arg)


if __name__ == "__main__":
    sys.exit(main())
