#!/usr/bin/env python3
"""Whether the man page's KEYS section names every key the monitor binds.

keys_check.py KEYS_C MAN_TXT   exits 1 with the missing keys, 0 when every one is there

KEYS_C is ui/keys.c: its `keys[]` table is the one source of the monitor's dispatch, key bar
and help screen, so the key codes are read from that table's code lists (every code, also
those the help screen tells together with another, such as `=` beside `+`), and the E
prompt's format letters from key_input. MAN_TXT is ranktop(1) rendered by `man -l` as plain
text. A key is documented when it is one of the terms of the KEYS section (the lines of that
section indented as a term, split on ", "; "1-6" stands for the digits 1 to 6); a format
letter when the E term's description names it ("c Chrome trace"). A key code this script
cannot name is an error too, so a new kind of key is noticed here rather than passed over.
"""
import re
import sys

# ncurses key codes and the words the man page writes for them.
NAMES = {
    "KEY_UP": "Up", "KEY_DOWN": "Down", "KEY_LEFT": "Left", "KEY_RIGHT": "Right",
    "KEY_PPAGE": "PgUp", "KEY_NPAGE": "PgDn", "KEY_HOME": "Home", "KEY_END": "End",
    "KEY_ENTER": "Enter", "KEY_BACKSPACE": "Backspace", "KEY_ESC": "Esc",
    "KEY_MOUSE": "Mouse", "KEY_F(15)": "Shift-F3",
}
CHARS = {"\\n": "Enter", "\\t": "Tab", " ": "Space", "\\\\": "\\"}
NUMBERS = {"127": "Backspace", "8": "Backspace"}
TOKEN = re.compile(r"KEY_F\(\d+\)|KEY_\w+|'(?:\\.|[^'\\])'|\d+")


def key_name(token):
    """The man page's word for one code of the table; None when there is none."""
    if token in NAMES:
        return NAMES[token]
    m = re.fullmatch(r"KEY_F\((\d+)\)", token)
    if m and int(m.group(1)) <= 12:
        return "F" + m.group(1)
    if token.startswith("'"):
        c = token[1:-1]
        return CHARS.get(c, c if len(c) == 1 and c.isprintable() else None)
    return NUMBERS.get(token)


def table_keys(src):
    """The key names of keys.c's table, and the format letters of the E prompt."""
    m = re.search(r"static const struct ui_key keys\[\] = \{(.*?)\n\};", src, re.S)
    if not m:
        raise SystemExit("keys_check: no `static const struct ui_key keys[]` table in keys.c")
    names, unknown = set(), []
    for codes in re.findall(r"\{\{([^}]*)\}", m.group(1)):
        for token in TOKEN.findall(codes):
            name = key_name(token)
            if name is None:
                unknown.append(token)
            else:
                names.add(name)
    if unknown:
        raise SystemExit("keys_check: key codes without a man-page name (teach NAMES): %s"
                         % " ".join(unknown))
    formats = re.findall(r"ch == '(.)'\s*\?\s*EXPORT_", src)
    if len(names) < 10 or not formats:
        raise SystemExit("keys_check: keys.c's table read as %s, formats %s: parser out of date"
                         % (sorted(names), formats))
    return names, formats


def man_keys(text):
    """The terms of the KEYS section, and each term's description, from `man -l` output."""
    m = re.search(r"^KEYS\n(.*?)(?=^\S)", text, re.S | re.M)
    if not m:
        raise SystemExit("keys_check: the man page has no KEYS section")
    lines = m.group(1).split("\n")
    terms = {}
    for i, line in enumerate(lines[:-1]):
        indent = len(line) - len(line.lstrip(" "))
        nxt = lines[i + 1]
        if line.strip() and len(nxt) - len(nxt.lstrip(" ")) > indent and nxt.strip():
            desc = []
            for d in lines[i + 1:]:
                if not d.strip():
                    break
                desc.append(d.strip())
            for word in line.strip().split(", "):
                r = re.fullmatch(r"(\d)-(\d)", word)
                words = [word]
                if r:
                    words = [str(d) for d in range(int(r.group(1)), int(r.group(2)) + 1)]
                for w in words:
                    terms[w] = " ".join(desc)
    return terms


def main():
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    with open(sys.argv[1], encoding="utf-8") as f:
        names, formats = table_keys(f.read())
    with open(sys.argv[2], encoding="utf-8") as f:
        terms = man_keys(f.read())
    bad = ["key %r is bound in keys.c but not a term of the man page's KEYS" % n
           for n in sorted(names) if n not in terms]
    export = terms.get("E", "")
    bad += ["E's format key %r is not in the man page's E entry (%r)" % (c, export)
            for c in formats if not re.search(r"(^|[ ,:])%s [A-Za-z]" % re.escape(c), export)]
    bad += ["the man page's KEYS names %r, which keys.c does not bind" % t
            for t in sorted(terms) if t not in names]
    for b in bad:
        print(b)
    print("keys_check: %d keys bound, %d in the man page, %d problems"
          % (len(names), len(terms), len(bad)))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
