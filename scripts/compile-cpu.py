#!/usr/bin/env python3
"""CPU seconds (user + system) to compile given files, with and without the precompiled header.

    scripts/compile-cpu.py BUILD_DIR FILE...      e.g. build/default src/cli/main.cpp

Each FILE is compiled alone with its exact command from BUILD_DIR/compile_commands.json (the
build's precompiled header must exist: build one target first), once as the build does and
once without the header's `-include` (and CMake's -Winvalid-pch), into a temporary object.
CPU time, not wall time: on a shared machine only the CPU time compares two runs
(docs/reliability.md, "Cutting CI's compile time").
"""
import json
import os
import resource
import shlex
import subprocess
import sys
import tempfile


def strip_pch(args):
    out, skip = [], False
    for arg in args:
        if skip:
            skip = False
        elif arg == "-include":
            skip = True
        elif arg != "-Winvalid-pch":
            out.append(arg)
    return out


def cpu_seconds(args, cwd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(args, cwd=cwd, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    build = os.path.abspath(sys.argv[1])
    with open(os.path.join(build, "compile_commands.json")) as f:
        commands = json.load(f)
    with tempfile.TemporaryDirectory() as tmp:
        obj = os.path.join(tmp, "out.o")
        for name in sys.argv[2:]:
            path = os.path.abspath(name)
            entry = next((e for e in commands if e["file"] == path), None)
            if entry is None:
                sys.exit(f"{name}: not in {build}/compile_commands.json")
            args = shlex.split(entry["command"])
            if os.path.basename(args[0]) == "ccache":
                args = args[1:]
            # Dependency files off, the object into the temporary directory.
            kept, skip = [], 0
            for arg in args:
                if skip:
                    skip -= 1
                elif arg in ("-MT", "-MF", "-o"):
                    skip = 1
                elif arg != "-MD":
                    kept.append(arg)
            kept += ["-o", obj]
            with_pch = cpu_seconds(kept, entry["directory"])
            without = cpu_seconds(strip_pch(kept), entry["directory"])
            print(f"{name}: {without:.1f} s without the precompiled header, {with_pch:.1f} s with it")


if __name__ == "__main__":
    main()
