"""What auditwheel would ask of opreg's shared objects, by readelf: NEEDED entries only from the
base system every manylinux/Debian machine has (libc, libm, libstdc++, libgcc_s, the dynamic
loader) or from the package itself (libopreg.so.*); exports only opreg's own (libopreg: symbols of
namespace opreg; the extension: PyInit__opreg); and, for files of a wheel, a run path of $ORIGIN.

    python3 self_contained.py [--wheel] FILE.so...     (exit 1 naming every problem)
"""
import re
import subprocess
import sys

BASE = {"libc.so.6", "libm.so.6", "libstdc++.so.6", "libgcc_s.so.1", "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1"}
OWN = re.compile(r"^libopreg\.so(\.\d+)*$")


def _readelf(*args):
    return subprocess.run(["readelf", *args], check=True, capture_output=True, text=True).stdout


def dynamic(path):
    """(NEEDED list, run path or None) of a shared object."""
    needed, runpath = [], None
    for line in _readelf("-d", path).splitlines():
        m = re.search(r"\((NEEDED|RPATH|RUNPATH)\)\s+\S.*\[(.*)\]", line)
        if m and m.group(1) == "NEEDED":
            needed.append(m.group(2))
        elif m:
            runpath = m.group(2)
    return needed, runpath


def exported(path):
    """Demangled names of the defined, exported dynamic symbols."""
    out = subprocess.run(["nm", "-D", "--defined-only", "-C", path], check=True, capture_output=True,
                         text=True).stdout
    return [line.split(" ", 2)[2] for line in out.splitlines() if line.count(" ") >= 2]


def problems(path, wheel=False):
    found = []
    needed, runpath = dynamic(path)
    for lib in needed:
        if lib not in BASE and not OWN.match(lib):
            found.append(f"{path}: NEEDED {lib} is neither a base system library nor opreg's own")
    extension = "/_opreg" in path or path.startswith("_opreg")
    for name in exported(path):
        ok = name == "PyInit__opreg" if extension else "opreg::" in name
        if not ok:
            found.append(f"{path}: exports {name!r}, which is not opreg's own")
            break  # one names the problem; the rest are alike
    if wheel and any(OWN.match(lib) for lib in needed) and runpath != "$ORIGIN":
        found.append(f"{path}: run path {runpath!r}; a wheel's file that needs libopreg needs $ORIGIN")
    return found


def main(argv):
    wheel = "--wheel" in argv
    files = [a for a in argv if a != "--wheel"]
    found = [p for f in files for p in problems(f, wheel)]
    for p in found:
        print(p)
    print(f"self_contained: {len(files)} files, {len(found)} problems")
    return 1 if found or not files else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
