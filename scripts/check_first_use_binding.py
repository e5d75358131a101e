#!/usr/bin/env python3
"""Checks that a process's first array binds none of the library's OS calls lazily.

    scripts/check_first_use_binding.py PROGRAM [ARG ...]

Runs PROGRAM (bench/harness/harness_first, which makes its first DynArray or Arena and a second
one) under glibc's LD_DEBUG=bindings, which reports every symbol the dynamic loader binds. The
bindings it reports before "transferring control" are made as the program is loaded; any after
it is a lazy binding, made inside the first call through a PLT entry. Fails (exit 1) if a call
the library makes for a first array (the reservation's mmap and madvise, the commit's mprotect,
the address-space limit's getrlimit, the page size's getauxval or sysconf, the thread registry's
pthread calls and operator new) is among the lazy ones; exit 77 (skipped) where the loader
does not report bindings (not glibc). Standard library only.
"""
import os
import re
import subprocess
import sys

# What the library calls for a first array (and harness_first does not call itself): the OS calls,
# and the runtime's functions that its first array's set-up calls.
CALLS = {"mmap", "mmap64", "madvise", "mprotect", "getrlimit", "getrlimit64", "munmap",
         "getauxval", "sysconf", "pthread_getspecific", "pthread_setspecific",
         "pthread_mutex_lock", "pthread_mutex_unlock", "_Znwm"}


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip().splitlines()[2].strip(), file=sys.stderr)
        return 2
    env = dict(os.environ, LD_DEBUG="bindings")
    env.pop("LD_BIND_NOW", None)  # the point is what happens without it
    out = subprocess.run(sys.argv[1:], env=env, capture_output=True, text=True)
    if out.returncode != 0:
        print(f"error: {sys.argv[1]} exited with {out.returncode}: {out.stderr[-2000:]}")
        return 1
    lines = out.stderr.splitlines()
    started = [i for i, line in enumerate(lines) if "transferring control" in line]
    if not started or not any("binding file" in line for line in lines):
        print("skipped: the dynamic loader reports no bindings (LD_DEBUG is glibc's)")
        return 77
    lazy = []
    for line in lines[started[0]:]:
        m = re.search(r"binding file (\S+).* to (\S+).*symbol `([^']+)'", line)
        if m and m.group(3) in CALLS:
            lazy.append(f"{m.group(3)} (from {m.group(1)} to {m.group(2)})")
    print(f"{sys.argv[1]} {' '.join(sys.argv[2:])}: "
          f"{len(lazy)} of the library's OS calls bound lazily" + (": " + ", ".join(lazy) if lazy else ""))
    return 1 if lazy else 0


if __name__ == "__main__":
    sys.exit(main())
