#!/usr/bin/env python3
"""Proves that the build enforces the layer rule (doc/design.md, "Layers"), using the compile
commands meson wrote for each layer library:

  * every public contract include/ranktop/LAYER/X.h sits in its owner's folder and compiles on its own (it includes what it needs)
    with the flags of each layer that may use it, and fails to compile with the flags of every
    layer below or beside its owner (the owner is the RANKTOP_SEES_<LAYER> its guard tests);
  * a private header of one layer folder cannot be included from another layer, neither by
    its bare name nor by its path from the project root;
  * the directions the design fixes (MUST_NOT_SEE) hold in the layer table itself.

Usage: check_layers.py SRCDIR BUILDDIR. Exits 1 and names every violation."""
import json, os, re, shlex, subprocess, sys, tempfile

src, build = sys.argv[1], sys.argv[2]
cmds = json.load(open(os.path.join(build, "compile_commands.json")))

layers = {}  # name -> (compiler argv without source/output, folder)
for e in cmds:
    m = re.search(r"librt_(\w+)\.a\.p/", e["output"])
    if not m or m.group(1) in layers:
        continue
    argv = shlex.split(e["command"])
    keep, skip = [], False
    for a in argv:
        if skip:
            skip = False
            continue
        if a in ("-o", "-c", "-MF", "-MQ"):
            skip = a != "-c"
            continue
        if a == "-MD" or a.endswith(".c"):
            continue
        keep.append(a)
    folder = os.path.relpath(os.path.dirname(os.path.join(e["directory"], e["file"])), src)
    layers[m.group(1)] = (keep, e["directory"], folder)

if len(layers) < 10:
    sys.exit(f"check_layers: found only {sorted(layers)} in compile_commands.json")


def sees(flags):
    return {a[len("-DRANKTOP_SEES_"):].lower() for a in flags if a.startswith("-DRANKTOP_SEES_")}


def compiles(flags, cwd, text):
    with tempfile.NamedTemporaryFile("w", suffix=".c", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run(flags + ["-fsyntax-only", "-Werror", f.name], cwd=cwd,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        return r.returncode == 0
    finally:
        os.unlink(f.name)


# Directions the design fixes, whatever meson.build says: the view models read the engine's
# published views (ranktop/model/snapshot.h, a model contract), never the engine or its collectors.
MUST_NOT_SEE = {
    "views": ["engine", "python", "proc", "devices", "discovery", "remote", "native"],
}

bad = []
for name, banned in sorted(MUST_NOT_SEE.items()):
    if name not in layers:
        bad.append(f"layer {name} not found")
        continue
    for b in banned:
        if b in sees(layers[name][0]):
            bad.append(f"layer {name} sees {b}, which it must not use")

inc = os.path.join(src, "include", "ranktop")
headers = sorted(os.path.relpath(os.path.join(d, f), inc) for d, _, fs in os.walk(inc) for f in fs
                 if f.endswith(".h"))
for h in headers:
    text = open(os.path.join(inc, h)).read()
    m = re.search(r"!defined\(RANKTOP_SEES_(\w+)\)", text)
    if not m:
        bad.append(f"include/ranktop/{h}: no layer guard")
        continue
    owner = m.group(1).lower()
    # The folder names the layer that owns the contract (include/ranktop/<layer>/).
    if os.path.dirname(h) != owner:
        bad.append(f"include/ranktop/{h}: owned by layer {owner}, not in include/ranktop/{owner}/")
    for name, (flags, cwd, _) in sorted(layers.items()):
        want = owner in sees(flags)
        got = compiles(flags, cwd, f'#include "ranktop/{h}"\n')
        if want != got:
            bad.append(f"ranktop/{h} (owner {owner}) {'does not compile' if want else 'compiles'}"
                       f" in layer {name}")

for name, (flags, cwd, folder) in sorted(layers.items()):
    for other, (_, _, ofolder) in sorted(layers.items()):
        if other == name:
            continue
        privs = [f for f in os.listdir(os.path.join(src, ofolder)) if f.endswith(".h")]
        for p in privs[:2]:
            for spelled in (p, f"{ofolder}/{p}"):
                if compiles(flags, cwd, f'#include "{spelled}"\n'):
                    bad.append(f"layer {name} can include {other}'s private \"{spelled}\"")

checked = len(headers) * len(layers)
for b in bad:
    print("check_layers:", b)
print(f"check_layers: {checked} contract/layer pairs, {len(layers)} layers, {len(bad)} violations")
sys.exit(1 if bad else 0)
