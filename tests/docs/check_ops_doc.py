#!/usr/bin/python3
"""check_ops_doc.py OPS_DEF FOREIGN_DEF OPS_MD: docs/ops.md covers every op.

Every built-in of compiler/ops.def (`OP(ID, "name", ...)`) must have a
section `### \`name\`` in docs/ops.md, with its signature, typing rule,
backward (`*Backward:*`) and an example (a ```spmd block, which
tests/docs/check_docs.py checks: ctest docs/ops); no section may name an op
that ops.def does not have.  Every name of compiler/foreign_names.def
(`FOREIGN("name", ...)`, the PyTorch/JAX names the resolver's help
explains) must be a row `| \`name\` |` of the page's last table.  An op
added to ops.def without its entry fails this test.
"""
import re
import sys


def main():
    if len(sys.argv) != 4:
        sys.exit(__doc__)
    ops = re.findall(r'^OP\(\w+,\s*"(\w+)"', open(sys.argv[1], encoding='utf-8').read(), re.M)
    foreign = re.findall(r'^FOREIGN\("(\w+)"', open(sys.argv[2], encoding='utf-8').read(), re.M)
    doc = open(sys.argv[3], encoding='utf-8').read()
    if not ops or not foreign:
        sys.exit('check_ops_doc.py: no OP(...) or FOREIGN(...) lines found: the .def format changed?')
    problems = []
    # the sections: ### `name` up to the next heading
    sections = {}
    for m in re.finditer(r'^### `(\w+)`\n(.*?)(?=^#)', doc + '\n#', re.M | re.S):
        sections[m.group(1)] = m.group(2)
    for name in ops:
        body = sections.get(name)
        if body is None:
            problems.append(f"op '{name}' of ops.def has no section \"### `{name}`\" in {sys.argv[3]}")
            continue
        if f'`{name}(' not in body and f'`{name}' not in body.split('\n', 2)[1]:
            problems.append(f"the section of '{name}' does not start with its signature `{name}(...)`")
        if '*Backward:*' not in body:
            problems.append(f"the section of '{name}' does not say its backward (*Backward:*)")
        if '```spmd' not in body or '<!-- test:' not in body:
            problems.append(f"the section of '{name}' has no tested example (a ```spmd block with its annotation)")
    for name in sections:
        if name not in ops:
            problems.append(f"section '{name}' names no op of ops.def")
    for name in foreign:
        if not re.search(r'^\| `' + re.escape(name) + r'` \|', doc, re.M):
            problems.append(f"'{name}' of foreign_names.def is not in the table of PyTorch/JAX names")
    for p in problems:
        print(p)
    if problems:
        sys.exit(f'FAIL: {len(problems)} problems')
    print(f'ok: {len(ops)} ops, {len(foreign)} foreign names')


main()
