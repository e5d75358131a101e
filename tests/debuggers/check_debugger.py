#!/usr/bin/env python3
"""Runs a debugger on inspect_me with reservoir's printers loaded and checks what it prints.

    check_debugger.py gdb  GDB  PROGRAM debuggers/gdb/reservoir_printers.py
    check_debugger.py lldb LLDB PROGRAM debuggers/lldb/reservoir_lldb.py

The program prints what each object holds (EXPECT lines) before it stops; the debugger's view of
each object must show the same length and capacity, and exactly the elements the program put in.
Exit status: 0 pass, 1 fail, 77 skipped (the debugger is not installed: CTest's SKIP_RETURN_CODE).
"""

import glob
import os
import re
import shutil
import subprocess
import sys

SKIP = 77

# What each object holds: its element texts as the debugger prints them, or None for an object
# with no elements (it must print no element block). std::string elements print through the
# standard library's own printer, as quoted strings.
ELEMENTS = {
    'ints': ['0', '10', '20', '30', '40'],
    'strings': ['"alpha"', '"beta"', '"a string longer than any small-string buffer"'],
    'empty': None,
    'source': None,
    'moved_to': ['1', '2', '3'],
    'concurrent': ['7', '8', '9'],
    'next_ints': ['5', '6', '7'],
    'next_concurrent': ['5', '6', '7'],
}
CONCURRENT = ('concurrent', 'next_concurrent')

# gdb's xmethods: expression -> value.
XMETHODS = {
    'ints[2]': '20',
    'concurrent[1]': '8',  # ConcurrentDynArray::operator[] is not instantiated: only the xmethod
    'strings.size()': '3',
    'empty.empty()': 'true',
    'next_ints[1]': '6',
    'next_concurrent.size()': '3',
}

MARK = '@@reservoir@@'


def split_top_level(text):
    """Splits 'a, "b, c", {d, e}' at the commas outside quotes and braces."""
    parts, depth, quoted, escaped, start = [], 0, False, False, 0
    for i, c in enumerate(text):
        if quoted:
            if escaped:
                escaped = False
            elif c == '\\':
                escaped = True
            elif c == '"':
                quoted = False
        elif c == '"':
            quoted = True
        elif c in '{[(<':
            depth += 1
        elif c in '}])>':
            depth -= 1
        elif c == ',' and depth == 0:
            parts.append(text[start:i].strip())
            start = i + 1
    tail = text[start:].strip()
    if tail:
        parts.append(tail)
    return parts


def lldb_python_path(lldb):
    """The directory holding lldb's own Python package, for PYTHONPATH, or None.

    Debian's lldb 14 reports a wrong one (`lldb -P`: /usr/lib/local/...), so its embedded Python
    cannot import `lldb` unless PYTHONPATH names the real one, beside the binary's LLVM prefix."""
    prefix = os.path.dirname(os.path.dirname(os.path.realpath(lldb)))
    for pattern in ('lib/python3*/dist-packages', 'lib/python3*/site-packages'):
        for d in sorted(glob.glob(os.path.join(prefix, pattern)), reverse=True):
            if os.path.exists(os.path.join(d, 'lldb', '__init__.py')):
                return d
    return None


def run(command, python_path=None):
    env = dict(os.environ)
    if python_path:
        env['PYTHONPATH'] = os.pathsep.join(p for p in (python_path, env.get('PYTHONPATH')) if p)
        # The Python embedded in lldb finds its home from the first python3 on PATH; put the one
        # installed beside lldb (the system's, which lldb links against) ahead of any other (a
        # pyenv or virtualenv python3 would hide the system's packages, such as six).
        env['PATH'] = os.pathsep.join((os.path.dirname(command[0]), env.get('PATH', '')))
    # LeakSanitizer refuses to run under ptrace; the program is killed at the breakpoint anyway.
    env['ASAN_OPTIONS'] = env.get('ASAN_OPTIONS', '') + ':detect_leaks=0'
    done = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                          timeout=240, check=False)
    return done.stdout.decode('utf-8', 'replace')


def expectations(output):
    """{name: {key: int}} from the program's EXPECT lines."""
    found = {}
    for m in re.finditer(r'^EXPECT (\w+) (.*)$', output, re.M):
        found[m.group(1)] = {k: int(v) for k, v in re.findall(r'(\w+)=(\d+)', m.group(2))}
    return found


def blocks(output):
    """{marker: text printed after it, up to the next marker}."""
    pieces = output.split(MARK)
    result = {}
    for piece in pieces[1:]:
        name, _, text = piece.partition('\n')
        result[name.strip()] = text
    return result


class Checker:
    def __init__(self):
        self.failures = []

    def check(self, ok, what, text):
        if not ok:
            self.failures.append('%s\n    got: %s' % (what, text.strip()[:600]))

    def header(self, name, text, expect):
        kind = 'ConcurrentDynArray' if name in CONCURRENT else 'DynArray'
        suffix = ' (published)' if name in CONCURRENT else ''
        want = 'reservoir::%s of length %d%s, capacity %d' % (kind, expect['size'], suffix,
                                                              expect['capacity'])
        self.check(want in text, '%s: the summary should say "%s"' % (name, want), text)


def elements_gdb(text):
    """The element texts of gdb's 'summary = {a, b, c}', or None without an element block."""
    line = text.strip().splitlines()[0] if text.strip() else ''
    m = re.search(r' = \{(.*)\}\s*$', line)
    return split_top_level(m.group(1)) if m else None


def elements_lldb(text):
    """The element texts of lldb's '[i] = value' child lines, or None if there are none."""
    found = re.findall(r'^\s*\[(\d+)\] = (.*?)\s*$', text, re.M)
    if not found:
        return None
    return [v for _, v in sorted(found, key=lambda p: int(p[0]))]


def check_gdb(gdb, program, script):
    names = list(ELEMENTS) + ['arena']
    command = [gdb, '-batch', '-nx', '-ex', 'set pagination off', '-ex', 'set width 0',
               '-ex', 'set print pretty off', '-ex', 'source ' + script,
               '-ex', 'break stop_here', '-ex', 'run', '-ex', 'up']
    for name in names:
        command += ['-ex', 'echo %s%s\\n' % (MARK, name), '-ex', 'print ' + name]
    for expr in XMETHODS:
        command += ['-ex', 'echo %s%s\\n' % (MARK, expr), '-ex', 'print ' + expr]
    command += ['-ex', 'echo %send\\n' % MARK, '-ex', 'kill', program]
    output = run(command)
    return output, elements_gdb, {expr: re.compile(r'^\$\d+ = %s$' % re.escape(value), re.M)
                                  for expr, value in XMETHODS.items()}


def check_lldb(lldb, program, script):
    names = list(ELEMENTS) + ['arena']
    command = [lldb, '--batch', '--no-lldbinit', '-o', 'command script import ' + script,
               '-o', 'breakpoint set --name stop_here', '-o', 'process launch',
               '-o', 'frame select 1']
    for name in names:
        command += ['-o', 'script print("%s%s")' % (MARK, name), '-o', 'frame variable ' + name]
    command += ['-o', 'script print("%send")' % MARK, '-o', 'process kill', program]
    return run(command, lldb_python_path(lldb)), elements_lldb, {}


def main():
    if len(sys.argv) != 5 or sys.argv[1] not in ('gdb', 'lldb'):
        print(__doc__)
        return 2
    which, debugger, program, script = sys.argv[1:]
    path = shutil.which(debugger) if debugger else None
    if not path:
        print('SKIP: %s is not installed (Debian: apt-get install %s)' % (which, which))
        return SKIP
    output, elements, xmethods = (check_gdb if which == 'gdb' else check_lldb)(path, program,
                                                                                 script)
    print(output)
    if which == 'lldb' and 'No module named' in output and MARK not in output:
        print('SKIP: lldb cannot load Python scripts here')
        return SKIP

    expect = expectations(output)
    found = blocks(output)
    c = Checker()
    c.check(set(expect) >= set(ELEMENTS) | {'arena'}, 'the program printed every EXPECT line',
            ' '.join(sorted(expect)))
    # Without a printer for the standard library's std::string, strings print as their raw
    # members: then check their count and that each element's text is in there. gdb has none for
    # libc++'s; lldb 14's libstdc++ summary matches std::string by a name that an element reached
    # through the array's T* does not carry (lldb shows std::allocator<> there), so lldb prints
    # the members, as it does for a `std::string*` dereferenced.
    raw_strings = which == 'lldb' or 'stdlib' in expect
    for name, want in ELEMENTS.items():
        text = found.get(name, '')
        if name in expect:
            c.header(name, text, expect[name])
        got = elements(text)
        if name == 'strings' and raw_strings and got is not None:
            c.check(len(got) == len(want) and all(w.strip('"') in text for w in want),
                    'strings: three elements holding the three texts', text)
            continue
        c.check(got == want, '%s: the elements should be %s' % (name, want), text)

    arena = found.get('arena', '')
    a = expect.get('arena', {})
    want = 'reservoir::Arena, %d of %d bytes used, %d committed' % (
        a.get('size', -1), a.get('reserved', -1), a.get('committed', -1))
    c.check(want in arena, 'arena: the summary should say "%s"' % want, arena)
    for field in ('granule = %d' % a.get('granule', -1), 'guard_pages = true'):
        c.check(field in arena, 'arena: a child "%s"' % field, arena)

    for expr, pattern in xmethods.items():
        text = found.get(expr, '')
        c.check(pattern.search(text), '%s should print %s' % (expr, XMETHODS[expr]), text)

    if c.failures:
        print('FAIL (%s):' % which)
        for f in c.failures:
            print('  ' + f)
        return 1
    print('PASS: %s shows %d arrays and an arena as the program holds them'
          % (which, len(ELEMENTS)))
    return 0


if __name__ == '__main__':
    sys.exit(main())
