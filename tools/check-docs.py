#!/usr/bin/env python3
"""check-docs.py: the paths and names the documentation cites exist.

  tools/check-docs.py                 docs/architecture.md in full, and the
                                      paths of README.md, docs/*.md, docs/ops/*.md
  tools/check-docs.py --root DIR      the same for the tree at DIR
  tools/check-docs.py --full F [--paths G ...]   these files only

Run by tests/test_docs.c in make check.  For a file checked in full
(--full; by default docs/architecture.md):

  1. every backticked token that looks like a path (it has a '/', or ends in
     .c .h .cu .py .sh .md .json) exists, relative to the repository root
     (a trailing '/' for a folder; tokens with a placeholder such as <op>,
     a wildcard, or that start with '/', '~', '$' or '-' are skipped, and so
     are build outputs under bin/, lib/ and build/);
  2. every source file of the C folders (include common jit tuner db daemon
     client cli: .c .h .map .dict) is cited at least once, so that a new file
     without its paragraph fails;
  3. every backticked identifier hct_NAME, hct__NAME, HCT_NAME, HCTUNE_NAME
     or cmd_NAME occurs in the sources.

For a file checked for paths only (--paths; by default README.md, docs/*.md
and docs/ops/*.md; not docs/perf/, which records history): rule 1 for the
tokens with a '/' whose first part is in the tree (prose writes rates such
as TB/s and example names such as engine.c), relative to the repository
root or to the document's own folder.  In both modes an all-capitals first
part (PREFIX/lib) is a placeholder and skipped.

Prints one line per problem, naming the document, its line and the token,
and exits 1 when there is any; exits 0 with a summary line otherwise.
"""
import os
import re
import sys

EXTS = ('.c', '.h', '.cu', '.py', '.sh', '.md', '.json')
C_FOLDERS = ('include', 'common', 'jit', 'tuner', 'db', 'daemon', 'client', 'cli')
C_EXTS = ('.c', '.h', '.map', '.dict')
SOURCE_FOLDERS = C_FOLDERS + ('tests', 'tools', 'examples', 'python', 'kernels-src')
BUILD_OUTPUTS = ('bin/', 'lib/', 'build/')
IDENT = re.compile(r'^(hct__?[a-z0-9_]+|HCT_[A-Z0-9_]+|HCTUNE_[A-Z0-9_]+|cmd_[a-z0-9_]+)(\(\))?$')


def code_spans(text):
    """(line number, token) for every whitespace-separated word of every
    inline code span (which may run over a line break, not a blank line),
    outside fenced code blocks."""
    lines, fenced = [], False
    for line in text.split('\n'):
        if line.lstrip().startswith('```'):
            fenced = not fenced
            lines.append('')
        else:
            lines.append('' if fenced else line)
    # Paragraph by paragraph, as Markdown pairs backticks.
    first = 1
    for para in '\n'.join(lines).split('\n\n'):
        for m in re.finditer(r'`([^`]+)`', para):
            line = first + para.count('\n', 0, m.start(1))
            for k, part in enumerate(m.group(1).split('\n')):
                for word in part.split():
                    yield line + k, word
        first += para.count('\n') + 2


def looks_like_path(tok):
    if tok.startswith(('/', '~', '$', '-', 'http:', 'https:')):
        return False
    if any(c in tok for c in '<>*?{}[]$=:|,;()\'"@'):
        return False
    if tok.startswith(BUILD_OUTPUTS):
        return False
    if re.match(r'^[A-Z][A-Z0-9_]*/', tok):  # PREFIX/lib, DIR/file: placeholders
        return False
    return '/' in tok or tok.endswith(EXTS)


def walk_files(root, folders):
    out = []
    for folder in folders:
        base = os.path.join(root, folder)
        for d, dirs, files in os.walk(base):
            dirs[:] = sorted(x for x in dirs if not x.startswith('.') and x != '__pycache__')
            for f in sorted(files):
                out.append(os.path.relpath(os.path.join(d, f), root))
    return out


def path_exists(root, doc_dir, tok, lenient, basenames):
    rel = tok.rstrip('/')
    if not rel:
        return True
    if lenient:
        # Prose documents write rates (TB/s), ratios and example names: a
        # path there is one whose first part is in the tree.
        first = rel.split('/')[0]
        if '/' not in rel or not (os.path.exists(os.path.join(root, first))
                                  or os.path.exists(os.path.join(root, doc_dir, first))):
            return True
    cands = [os.path.join(root, rel)]
    if lenient:
        cands.append(os.path.join(root, doc_dir, rel))
    for c in cands:
        if tok.endswith('/') and os.path.isdir(c):
            return True
        if not tok.endswith('/') and os.path.exists(c):
            return True
    return lenient and '/' not in rel and rel in basenames


def main(argv):
    root = '.'
    full, paths = [], []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ('--root', '--full', '--paths') and i + 1 < len(argv):
            if a == '--root':
                root = argv[i + 1]
            elif a == '--full':
                full.append(argv[i + 1])
            else:
                paths.append(argv[i + 1])
            i += 2
        elif a in ('-h', '--help'):
            print(__doc__)
            return 0
        else:
            print('check-docs.py: unknown argument %r (see --help)' % a)
            return 2
    if not full and not paths:
        full = ['docs/architecture.md']
        paths = ['README.md']
        for d in ('docs', 'docs/ops'):
            dd = os.path.join(root, d)
            if os.path.isdir(dd):
                paths += sorted(os.path.join(d, f) for f in os.listdir(dd)
                                if f.endswith('.md') and os.path.join(d, f) not in full)

    all_files = walk_files(root, SOURCE_FOLDERS + ('docs',))
    basenames = {os.path.basename(f) for f in all_files}
    problems = []
    checked = 0

    for doc, lenient in [(f, False) for f in full] + [(f, True) for f in paths]:
        try:
            with open(os.path.join(root, doc), encoding='utf-8') as fh:
                text = fh.read()
        except OSError as e:
            problems.append('%s: cannot read: %s' % (doc, e.strerror))
            continue
        doc_dir = os.path.dirname(doc)
        for n, tok in code_spans(text):
            tok = tok.rstrip('.,;:)')
            if looks_like_path(tok):
                checked += 1
                if not path_exists(root, doc_dir, tok, lenient, basenames):
                    problems.append('%s:%d: cites `%s`, which does not exist' % (doc, n, tok))

    if full:
        words = set()
        for f in walk_files(root, SOURCE_FOLDERS):
            if f.endswith(('.c', '.h', '.cu', '.py', '.sh', '.map', '.in', '.service', '.socket')) \
                    or os.path.basename(f) in ('Makefile',):
                try:
                    with open(os.path.join(root, f), encoding='utf-8', errors='replace') as fh:
                        words.update(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', fh.read()))
                except OSError:
                    pass
        mk = os.path.join(root, 'Makefile')
        if os.path.exists(mk):
            with open(mk, encoding='utf-8', errors='replace') as fh:
                words.update(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', fh.read()))
        cited = set()
        for doc in full:
            try:
                with open(os.path.join(root, doc), encoding='utf-8') as fh:
                    text = fh.read()
            except OSError:
                continue
            for n, tok in code_spans(text):
                tok = tok.rstrip('.,;:')
                cited.add(tok.rstrip('/'))
                m = IDENT.match(tok)
                if m:
                    checked += 1
                    if m.group(1) not in words:
                        problems.append('%s:%d: names `%s`, which no source file has'
                                        % (doc, n, tok))
        for f in walk_files(root, C_FOLDERS):
            if f.endswith(C_EXTS) and f not in cited:
                problems.append('%s: `%s` has no paragraph (never cited in backticks)'
                                % (', '.join(full), f))

    for p in problems:
        print(p)
    if problems:
        print('check-docs: %d problem(s) in %s' % (len(problems), ', '.join(full + paths)))
        return 1
    print('check-docs: ok: %d citations checked in %d file(s)' % (checked, len(full) + len(paths)))
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
