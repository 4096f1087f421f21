#!/usr/bin/env python3
"""check-layers.py: the product's files use only the layers below them, and
no two of its files use each other in a loop.

  tools/check-layers.py --objects build/release     the tree here, with the
                                                    objects make built there
  tools/check-layers.py --root DIR --objects DIR2   another tree

Run by tests/test_layers.c in make check.  The layers (docs/architecture.md,
"The layers", says why) are the table USES below: a folder may use itself
and the folders its row names, nothing else.  "Use" is read two ways:

  1. includes: every #include "x" of a .c or .h file in the product
     folders, resolved as the compiler does (the includer's folder, then
     the Makefile's -I folders in their order); a header outside the
     product folders (kernels-src/common/hct_parity.h) is not layered;
  2. calls: every undefined symbol of a source's object (nm), resolved to
     the source whose object defines it.  An object is where the build put
     it: OBJECTS/<folder>/<name>.o for <folder>/<name>.c.

A use the table forbids is one line naming the file, what it uses (the
header, or the symbol and the file defining it) and what its folder may
use.  A loop is a set of files each reaching every other through uses of
either kind; each is one line, "loop:" and a cycle through it with the
symbols or headers of each step.  Every source of the product folders must
have its object (a missing one would hide its calls), except those listed
in BUILT_ELSEWHERE.  Exits 1 naming every problem, 0 with a summary line.
"""
import collections
import os
import re
import subprocess
import sys

# The layers: what each folder of the product may use besides itself.
# include/ holds the one public header (hctune.h), which every layer may
# read.  To add a folder, give it a row and a place in docs/architecture.md.
USES = {
    'include': (),
    'common': ('include',),
    'jit': ('common', 'include'),
    'db': ('jit', 'common', 'include'),
    'tuner': ('db', 'jit', 'common', 'include'),
    'daemon': ('db', 'jit', 'common', 'include'),
    'client': ('jit', 'common', 'include'),
    'cli': ('client', 'daemon', 'tuner', 'db', 'jit', 'common', 'include'),
}
# The compiler's search order for #include "x" after the includer's own
# folder (the Makefile's CPPFLAGS).
INCLUDE_PATH = ('include', 'common', 'jit', 'db', 'tuner', 'daemon', 'client', 'cli')
SOURCE_EXTS = ('.c', '.h')
# Sources of the product folders that make all does not compile into
# OBJECTS, with the reason; only their includes are checked.
BUILT_ELSEWHERE = {
    'daemon/fuzz_request.c': 'make fuzz compiles it with clang straight into the fuzzer',
}
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def product_files(root):
    out = []
    for folder in USES:
        base = os.path.join(root, folder)
        if not os.path.isdir(base):
            continue
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if not x.startswith('.'))
            for f in sorted(files):
                if f.endswith(SOURCE_EXTS):
                    out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def folder_of(rel):
    return rel.split('/')[0]


def resolve_include(root, includer, name):
    """The product file `name` refers to from `includer`, or None when it
    is outside the product folders (or not found: the compiler says so)."""
    for d in (os.path.dirname(includer),) + INCLUDE_PATH:
        p = os.path.normpath(os.path.join(d, name))
        if os.path.isfile(os.path.join(root, p)):
            return p if not p.startswith('..') and folder_of(p) in USES else None
    return None


def read_nm(path):
    """(defined, undefined) external symbols of an object."""
    out = subprocess.run(['nm', path], capture_output=True, text=True)
    if out.returncode != 0:
        raise OSError(out.stderr.strip() or 'nm failed')
    defined, undefined = set(), set()
    for line in out.stdout.splitlines():
        p = line.split()
        if len(p) == 2 and p[0] == 'U':
            undefined.add(p[1])
        elif len(p) == 3 and p[1] in 'TDBRVWCGS':
            defined.add(p[2])
    return defined, undefined


def find_cycle(comp, edges):
    """One shortest cycle within the strongly connected set comp, from its
    first file in sorted order back to it (breadth-first)."""
    start = sorted(comp)[0]
    prev = {start: None}
    queue = collections.deque([start])
    while queue:
        v = queue.popleft()
        for w in sorted(edges.get(v, {})):
            if w not in comp:
                continue
            if w == start:
                path = [v]
                while prev[path[-1]] is not None:
                    path.append(prev[path[-1]])
                return list(reversed(path)) + [start]
            if w not in prev:
                prev[w] = v
                queue.append(w)
    return [start, start]


def strongly_connected(nodes, edges):
    """Tarjan's algorithm, iteratively: the sets of more than one file."""
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]
    for root_node in sorted(nodes):
        if root_node in index:
            continue
        work = [(root_node, iter(sorted(edges.get(root_node, {}))))]
        index[root_node] = low[root_node] = counter[0]
        counter[0] += 1
        stack.append(root_node)
        on.add(root_node)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, {})))))
                    advanced = True
                    break
                if w in on:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(comp)
    return out


def main(argv):
    root, objects = '.', None
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ('--root', '--objects') and i + 1 < len(argv):
            if a == '--root':
                root = argv[i + 1]
            else:
                objects = argv[i + 1]
            i += 2
        elif a in ('-h', '--help'):
            print(__doc__)
            return 0
        else:
            print('check-layers.py: unknown argument %r (see --help)' % a)
            return 2
    if objects is None:
        print('check-layers.py: --objects is required (the build folder, e.g. build/release)')
        return 2

    files = product_files(root)
    problems = []
    # edges[a][b]: what a uses of b (header names or symbols).
    edges = collections.defaultdict(lambda: collections.defaultdict(set))

    for f in files:
        with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
            text = fh.read()
        for name in INCLUDE_RE.findall(text):
            target = resolve_include(root, f, name)
            if target is not None and target != f:
                edges[f][target].add('#include "%s"' % name)

    defined_by = {}
    undefined = {}
    nobj = 0
    for f in files:
        if not f.endswith('.c'):
            continue
        obj = os.path.join(objects, f[:-2] + '.o')
        if not os.path.exists(obj):
            if f not in BUILT_ELSEWHERE:
                problems.append('%s: no object %s (build it first: make; its calls would go '
                                'unchecked)' % (f, obj))
            continue
        try:
            d, u = read_nm(obj)
        except OSError as e:
            problems.append('%s: cannot read the symbols of %s: %s' % (f, obj, e))
            continue
        nobj += 1
        undefined[f] = u
        for s in d:
            defined_by.setdefault(s, f)
    for f, syms in undefined.items():
        for s in syms:
            g = defined_by.get(s)
            if g is not None and g != f:
                edges[f][g].add(s)

    nuses = 0
    for f in sorted(edges):
        mine = folder_of(f)
        for g in sorted(edges[f]):
            nuses += 1
            theirs = folder_of(g)
            if theirs == mine or theirs in USES[mine]:
                continue
            allowed = ', '.join(x + '/' for x in USES[mine]) or 'nothing else'
            for what in sorted(edges[f][g]):
                if what.startswith('#include'):
                    problems.append('layers: %s includes %s (%s): %s/ may use %s only'
                                    % (f, g, what, mine, allowed))
                else:
                    problems.append('layers: %s calls %s of %s: %s/ may use %s only'
                                    % (f, what, g, mine, allowed))

    for comp in sorted(strongly_connected(set(edges), edges), key=lambda c: sorted(c)):
        cycle = find_cycle(comp, edges)
        steps = []
        for a, b in zip(cycle, cycle[1:]):
            what = sorted(edges[a][b])
            more = ' ...' if len(what) > 3 else ''
            steps.append('%s -> %s (%s%s)' % (a, b, ', '.join(what[:3]), more))
        others = sorted(comp - set(cycle))
        tail = '; with %s' % ', '.join(others) if others else ''
        problems.append('loop: %s%s' % ('; '.join(steps), tail))

    for p in problems:
        print(p)
    if problems:
        print('check-layers: %d problem(s)' % len(problems))
        return 1
    print('check-layers: ok: %d files, %d objects, %d uses between files'
          % (len(files), nobj, nuses))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
