#!/usr/bin/python3
"""The layout's rules (docs/architecture.md), checked on the source tree:

  1. every attnrank include in a header or in src/ runs downward: a file
     includes only headers of its own module or of lower ones (base < numbers <
     linalg, io < attention < reach < tutorial < analysis; linalg and io do not
     include each other);
  2. the umbrella header attnrank/attnrank.hpp reaches every public header;
  3. the command line (cli/) includes no detail header and names no detail::;
  4. no header, source or doc points outside the repository (to the parent
     directory's private notes, or design.md), and every docs/*.md or tests/...
     path a header names exists;
  5. the library speaks in its questions' words, not in command-line flags: no
     string literal in src/ or include/ holds `--` followed by a letter (the CLI
     and Python both show the library's messages; each spells its own options);
  6. docs/architecture.md's tree names every header and source of the library
     (by its stem, in its module's lines), and every src/ file it lists exists;
  7. docs/performance.md and docs/reliability.md say what holds now: no dated
     history (no YYYY-MM-DD; that goes to performance-log.md, reliability-log.md);
  8. every public header has its test file (tests/<module>/<name>.test.cpp) or a
     row in architecture.md's "Where each public header is tested", whose files exist;
  9. each test program is named after the folder its sources live in: <folder>_test,
     or <folder>_<part>_test when a folder's tests run as several programs
     (tests/CMakeLists.txt); a program's sources all live in that one folder.

usage: check_layout.py SOURCE_DIR     (exit 0 when every rule holds)
"""
import os
import re
import sys

RANK = {'base': 0, 'numbers': 1, 'linalg': 2, 'io': 2, 'attention': 3, 'reach': 4, 'tutorial': 5, 'analysis': 6}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]attnrank/([^>"]+)[>"]', re.M)


def module_of(rel):
    """The module of a header path relative to include/attnrank."""
    top = rel.split('/')[0]
    if '/' in rel:
        return top
    name = rel[:-len('.hpp')]
    return name if name in RANK else 'base'  # numbers.hpp, ... belong to their module


FLAG = re.compile(r'--[A-Za-z][A-Za-z0-9-]*')
LITERAL = re.compile(r'"((?:[^"\\\n]|\\.)*)"|//[^\n]*|/\*.*?\*/|\'(?:[^\'\\\n]|\\.)*\'', re.S)


def string_literals(code):
    """(line, text) of every string literal in C++ code, comments skipped."""
    for m in LITERAL.finditer(code):
        if m.group(1) is not None:
            yield code.count('\n', 0, m.start()) + 1, m.group(1)


def main(src):
    root = os.path.join(src, 'include', 'attnrank')
    headers = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            rel = os.path.relpath(os.path.join(dirpath, f), root)
            with open(os.path.join(dirpath, f), encoding='utf-8') as h:
                headers[rel] = h.read()
    problems = []

    for rel, text in sorted(headers.items()):
        mine = module_of(rel)
        for inc in INCLUDE.findall(text):
            if inc not in headers:
                problems.append(f'{rel}: includes attnrank/{inc}, which does not exist')
                continue
            theirs = module_of(inc)
            if rel == 'attnrank.hpp':
                continue  # the umbrella includes everything
            if theirs != mine and RANK[theirs] >= RANK[mine]:
                problems.append(f'{rel} ({mine}) includes attnrank/{inc} ({theirs}): '
                                'a header may include only its own module or lower ones')

    # 1b. the compiled sources (src/<module>/*.cpp) follow the same order
    for dirpath, _, files in os.walk(os.path.join(src, 'src')):
        for f in sorted(files):
            rel = os.path.relpath(os.path.join(dirpath, f), src)
            mine = rel.split(os.sep)[1]
            if mine not in RANK:
                problems.append(f'{rel}: src/ holds one folder per module, and {mine} is none')
                continue
            with open(os.path.join(dirpath, f), encoding='utf-8') as h:
                for inc in INCLUDE.findall(h.read()):
                    theirs = module_of(inc) if inc in headers else None
                    if theirs is None:
                        problems.append(f'{rel}: includes attnrank/{inc}, which does not exist')
                    elif theirs != mine and RANK[theirs] >= RANK[mine]:
                        problems.append(f'{rel} ({mine}) includes attnrank/{inc} ({theirs}): '
                                        'a source may include only its own module or lower ones')

    # 2. the umbrella reaches every public (non-detail) header
    seen, todo = set(), ['attnrank.hpp']
    while todo:
        h = todo.pop()
        if h in seen or h not in headers:
            continue
        seen.add(h)
        todo.extend(INCLUDE.findall(headers[h]))
    for rel in sorted(headers):
        if '/detail/' not in rel and rel not in seen:
            problems.append(f'attnrank/attnrank.hpp does not reach the public header attnrank/{rel}')

    # 3. the CLI is an adapter: no detail headers, no detail:: names
    cli = os.path.join(src, 'cli')
    for f in sorted(os.listdir(cli)):
        if not f.endswith(('.cpp', '.hpp')):
            continue
        with open(os.path.join(cli, f), encoding='utf-8') as h:
            for n, line in enumerate(h, 1):
                if re.search(r'attnrank/[a-z_/]*detail/', line) or re.search(r'\bdetail::', line):
                    problems.append(f'cli/{f}:{n}: the command line uses library internals: {line.strip()}')

    # 4. nothing points outside the repository or at files that do not exist
    scanned = [(os.path.join('include', 'attnrank', r), t) for r, t in headers.items()]
    for top in ('src', 'cli', 'docs', 'examples', 'tests', 'bench', 'fuzz'):
        for dirpath, _, files in os.walk(os.path.join(src, top)):
            if 'inputs' in dirpath or 'corpus' in dirpath:
                continue
            for f in files:
                if f.endswith(('.hpp', '.cpp', '.md', '.py', '.cmake', '.txt')) and f != 'check_layout.py':
                    p = os.path.join(dirpath, f)
                    with open(p, encoding='utf-8') as h:
                        scanned.append((os.path.relpath(p, src), h.read()))
    with open(os.path.join(src, 'README.md'), encoding='utf-8') as h:
        scanned.append(('README.md', h.read()))
    for rel, text in scanned:
        for bad in ('..' + '/shared', 'design.md'):  # spelled apart: this file names no such path
            if bad in text:
                problems.append(f'{rel}: names {bad}, which is not in the repository')
        if rel.startswith(('include', 'src')):
            for path in set(re.findall(r'\b((?:docs|tests)/[A-Za-z0-9_./-]*[A-Za-z0-9_])', text)):
                if not os.path.exists(os.path.join(src, path)):
                    problems.append(f'{rel}: names {path}, which does not exist')

    # 5. no command-line flag in a library string
    for rel, text in scanned:
        if rel.startswith(('include', 'src')):
            for line_number, literal in string_literals(text):
                flag = FLAG.search(literal)
                if flag:
                    problems.append(f'{rel}:{line_number}: the library names the command-line flag '
                                    f'{flag.group(0)} in "{literal}": say it in the question\'s words')

    # 6. architecture.md's tree against the files
    with open(os.path.join(src, 'docs', 'architecture.md'), encoding='utf-8') as h:
        arch = h.read()
    start = arch.index('    include/attnrank/\n')
    tree = arch[start:arch.index('\n    cli/', start)]
    words = set(re.findall(r'[A-Za-z_][A-Za-z0-9_]*', tree))
    for rel in sorted(headers):
        stem = os.path.splitext(os.path.basename(rel))[0]
        if stem not in words:
            problems.append(f'docs/architecture.md: the tree does not name include/attnrank/{rel}')
    for dirpath, _, files in os.walk(os.path.join(src, 'src')):
        for f in sorted(files):
            stem = os.path.splitext(f)[0]
            if stem not in words:
                problems.append(f'docs/architecture.md: the tree does not name {os.path.relpath(os.path.join(dirpath, f), src)}')
    for module, names in re.findall(r'\b([a-z]+)/\{([^}]*)\}', tree):
        for name in re.split(r'[,\s]+', names.strip()):
            if name and not os.path.exists(os.path.join(src, 'src', module, name + '.cpp')):
                problems.append(f'docs/architecture.md: the tree lists src/{module}/{name}.cpp, which does not exist')

    # 7. the reference pages hold no dated history
    for page in ('performance.md', 'reliability.md'):
        with open(os.path.join(src, 'docs', page), encoding='utf-8') as h:
            for n, line in enumerate(h, 1):
                date = re.search(r'\b20\d\d-\d\d-\d\d\b', line)
                if date:
                    problems.append(f'docs/{page}:{n}: a date ({date.group(0)}): dated history belongs in the log')

    # 8. every public header is tested: its own file, or a row saying where
    table = arch[arch.index('## Where each public header is tested'):]
    table = table[:table.index('\n## ', 1)]
    elsewhere = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip('|').split('|')]
        if len(cells) == 3 and '/' in cells[0] and not cells[0].startswith('-'):
            elsewhere[cells[0]] = [f.strip() for f in cells[1].split(',')]
    for rel in sorted(headers):
        if '/detail/' in rel or '/' not in rel:
            continue
        stem = rel[:-len('.hpp')]
        own = os.path.join(src, 'tests', stem + '.test.cpp')
        if os.path.exists(own):
            continue
        if stem not in elsewhere:
            problems.append(f'include/attnrank/{rel}: no tests/{stem}.test.cpp and no row in architecture.md\'s '
                            '"Where each public header is tested"')
            continue
        for f in elsewhere[stem]:
            if not os.path.exists(os.path.join(src, f)):
                problems.append(f'docs/architecture.md: {stem} is tested in {f}, which does not exist')

    # 9. test programs are named after their folders
    with open(os.path.join(src, 'tests', 'CMakeLists.txt'), encoding='utf-8') as h:
        cmake = h.read()
    programs = re.findall(r'(?m)^\s*attnrank_test\(\s*(\w+)\s+LABELS[^)]*?SOURCES([^)]*)\)', cmake)
    if not programs:
        problems.append('tests/CMakeLists.txt: no attnrank_test(...) program found (the rule reads them)')
    for name, sources in programs:
        folders = {f.split('/')[0] for f in sources.split()}
        if len(folders) != 1:
            problems.append(f'tests/CMakeLists.txt: {name} takes sources from {len(folders)} folders ({", ".join(sorted(folders))})')
            continue
        folder = folders.pop()
        if not re.fullmatch(re.escape(folder) + r'(_[a-z0-9]+)?_test', name):
            problems.append(f'tests/CMakeLists.txt: {name} tests {folder}/: name it {folder}_test or {folder}_<part>_test')

    # 10. every thread the library, the command line and the binding start starts in
    #     numbers/detail/parallel.hpp, where ATTNRANK_THREADS caps it
    starts_thread = re.compile(r'\bstd::(?:async|jthread)\b|\bpthread_create\b|\bstd::thread\b(?!::)')
    for top in ('include', 'src', 'cli', 'python'):
        for dirpath, _, files in os.walk(os.path.join(src, top)):
            for f in sorted(files):
                rel = os.path.relpath(os.path.join(dirpath, f), src)
                if not f.endswith(('.hpp', '.cpp')) or rel == os.path.join('include', 'attnrank', 'numbers', 'detail', 'parallel.hpp'):
                    continue
                with open(os.path.join(dirpath, f), encoding='utf-8') as h:
                    for n, line in enumerate(h, 1):
                        code = line.split('//')[0]
                        if starts_thread.search(code):
                            problems.append(f'{rel}:{n}: starts a thread outside numbers/detail/parallel.hpp '
                                            f'(ATTNRANK_THREADS caps only those): {line.strip()}')

    for p in problems:
        print(p)
    print(f'check_layout: {len(headers)} headers, {len(problems)} problems')
    return 1 if problems else 0


if __name__ == '__main__':
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1]))
