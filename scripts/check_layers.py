"""check_layers.py — the layer boundaries, read from the built objects.

Usage: check_layers.py BUILD_DIR HEADER LIBSO EXTSO

Fails (exit 1, one line per offence) when
  - an object of src/<folder>/ refers to a symbol defined in a folder its
    layer may not reach (the arrows below), or to Python's C API;
  - libolympus.so exports a name the public header does not declare with
    OLY_API, or misses one it does;
  - the extension module exports anything but PyInit__core.

Layers, lowest first: core < ir < prims (rules) < trans < cpu (kernels) <
exec < rt.  A folder may reach only the folders listed for it; primitive rules
calling transform drivers (control flow transforming its bodies) is expected.
"""
import os
import re
import subprocess
import sys

MAY_REACH = {
    "core":  {"core"},
    "ir":    {"core", "ir", "prims"},          # the builder asks rows for shape rules
    "prims": {"core", "ir", "prims", "trans"},
    "trans": {"core", "ir", "prims", "trans"},
    "cpu":   {"core", "ir", "prims", "cpu"},
    "exec":  {"core", "ir", "prims", "trans", "cpu", "exec"},
    "rt":    {"core", "ir", "prims", "trans", "cpu", "exec", "rt"},
}
PYTHON = re.compile(r"^_?Py|^PyInit_")
# Every allocation goes through the funnel in src/core/alloc.c (fault
# injection relies on it): no other object calls the C allocator directly.
ALLOCATORS = {"malloc", "calloc", "realloc", "aligned_alloc", "posix_memalign", "memalign",
              "strdup", "strndup"}
FUNNEL = "core/alloc.o"


def nm(args, path):
    out = subprocess.run(["nm"] + args + [path], check=True, capture_output=True,
                         text=True).stdout
    rows = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) >= 2:
            rows.append((parts[-2], parts[-1]))
    return rows


def objects(build):
    src = os.path.join(build, "src")
    for folder in sorted(os.listdir(src)):
        d = os.path.join(src, folder)
        if not os.path.isdir(d):
            continue
        for f in sorted(os.listdir(d)):
            if f.endswith(".o"):
                yield folder, os.path.join(d, f)


def check_arrows(build):
    bad = []
    where = {}   # symbol -> folder defining it
    undefined = []
    for folder, obj in objects(build):
        if folder not in MAY_REACH:
            bad.append(f"{obj}: folder src/{folder} has no place in the layer table")
            continue
        for kind, sym in nm(["--defined-only"], obj):
            if kind in "TtDdBbRrVvWw":
                where.setdefault(sym, folder)
        for _, sym in nm(["--undefined-only"], obj):
            undefined.append((folder, obj, sym))
    for folder, obj, sym in undefined:
        if PYTHON.match(sym):
            bad.append(f"{obj}: the C library reaches Python ({sym})")
            continue
        if sym in ALLOCATORS and not obj.endswith(FUNNEL):
            bad.append(f"{obj}: calls {sym} directly; allocate through oly__malloc and friends "
                       "(src/core/alloc.c)")
            continue
        target = where.get(sym)
        if target and target not in MAY_REACH[folder]:
            bad.append(f"{obj}: src/{folder} may not reach src/{target} ({sym})")
    return bad


def declared_api(header):
    text = open(header).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    names = set(re.findall(r"\bOLY_API\b[^;{]*?\b(oly_\w+)\s*\(", text))
    return names


def exported(so):
    return {sym for kind, sym in nm(["-D", "--defined-only"], so) if kind in "TtDdBbRrVvWw"}


def check_exports(header, libso, extso):
    bad = []
    api = declared_api(header)
    got = exported(libso)
    for sym in sorted(got - api):
        bad.append(f"{libso}: exports {sym}, which {header} does not declare with OLY_API")
    for sym in sorted(api - got):
        bad.append(f"{libso}: does not export {sym}, declared with OLY_API in {header}")
    ext = exported(extso)
    for sym in sorted(ext - {"PyInit__core"}):
        bad.append(f"{extso}: exports {sym}; the extension exports only PyInit__core")
    if "PyInit__core" not in ext:
        bad.append(f"{extso}: does not export PyInit__core")
    return bad


def main(argv):
    if len(argv) != 5:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    build, header, libso, extso = argv[1:]
    bad = check_arrows(build) + check_exports(header, libso, extso)
    for line in bad:
        print("check-layers:", line)
    n_obj = sum(1 for _ in objects(build))
    if bad:
        print(f"check-layers: {len(bad)} offence(s)")
        return 1
    print(f"check-layers: {n_obj} objects, {len(declared_api(header))} public names: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
