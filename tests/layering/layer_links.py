#!/usr/bin/env python3
"""The layers' link direction (lib/CMakeLists.txt, docs/ARCHITECTURE.md).

Each layer's object library must link against itself and the layers below it alone: every symbol
its objects leave undefined and that some layer of libcollx defines is defined in the layer or
below it. An include that points up the stack fails to compile (the include test beside this
one); a call that does (a declaration in a public header, defined in a layer above) compiles and
is caught here. Symbols no layer defines (the C++ runtime, MPI, the kernels) are not the layers'.

Usage: layer_links.py NM MANIFEST, where MANIFEST has one line per layer:
    name<TAB>below,below,...<TAB>object|object|...
Exit status 1, with each offending symbol and the layer that defines it, if a layer links upward.
"""
import subprocess
import sys


def symbols(nm, objects, defined):
    flag = "--defined-only" if defined else "--undefined-only"
    out = subprocess.run([nm, flag, "--format=posix"] + objects, capture_output=True, text=True,
                         check=True).stdout
    found = set()
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 2 or line.endswith(":"):
            continue
        name, kind = parts[0], parts[1]
        # Defined: global code and data only (local symbols and the weak definitions of inline
        # functions and templates, which every user carries, are nobody's to own).
        if defined and kind not in "TDBRG":
            continue
        found.add(name)
    return found


def main():
    nm, manifest = sys.argv[1], sys.argv[2]
    layers = {}
    for line in open(manifest):
        if not line.strip():
            continue
        name, below, objects = line.rstrip("\n").split("\t")
        layers[name] = ([b for b in below.split(",") if b], [o for o in objects.split("|") if o])
    if len(layers) < 2 or any(not objects for _, objects in layers.values()):
        print("layer_links: a layer with no objects in", manifest)
        return 1
    defined = {name: symbols(nm, objects, True) for name, (_, objects) in layers.items()}
    upward = []
    for name, (below, objects) in layers.items():
        allowed = set(below) | {name}
        for symbol in sorted(symbols(nm, objects, False)):
            owners = [other for other in layers if symbol in defined[other]]
            if owners and not set(owners) & allowed:
                readable = subprocess.run(["c++filt", symbol], capture_output=True,
                                          text=True).stdout.strip() or symbol
                upward.append(f"{name} -> {', '.join(owners)}: {readable}")
    for line in upward:
        print(line)
    print(f"{len(layers)} layers, {len(upward)} upward references")
    return 1 if upward else 0


if __name__ == "__main__":
    sys.exit(main())
