#!/usr/bin/python3
"""diag_rules.py [--check | --update] [DOC]: the catalogue of spmdc's error
rule ids in docs/diagnostics.md (between its `rules begin` and `rules end`
markers).

Every error spmdc reports has a rule id, `phase/kind` (diag_rule_id() in
compiler/diag.c): the phase is named after the file that reports the error,
the kind is made of the words of its format string.  This script finds every
error_at / check_error call (and the *_rule variants, which name their rule)
in compiler/ and grammar/, computes the same ids, and prints the catalogue;
--update writes it into DOC, --check fails when DOC is out of date.
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOC = os.path.join(ROOT, 'docs', 'diagnostics.md')
BEGIN, END = '<!-- rules begin: scripts/diag_rules.py --update -->', '<!-- rules end -->'

# The same tables as compiler/diag.c.
PHASES = {'lexer.re': 'syntax', 'parser.y': 'syntax', 'ast.c': 'syntax', 'resolve.c': 'resolve',
          'check.c': 'type', 'check_diag.c': 'type', 'check_rules.c': 'type', 'check_elementwise.c': 'type',
          'check_nn.c': 'type', 'check_create.c': 'type', 'check_autodiff.c': 'type', 'check_record.c': 'type',
          'check_select.c': 'type', 'check_attention.c': 'type', 'check_io.c': 'type', 'check_collectives.c': 'type', 'shardprop.c': 'type',
          'redistribute.c': 'type',
          'types.c': 'type', 'lower.c': 'lower', 'ir.c': 'lower', 'autodiff.c': 'autodiff', 'emit_c.c': 'codegen',
          'main.c': 'driver', 'source.c': 'driver'}
FILLER = {'a', 'an', 'the', 'is', 'are', 'be', 'of', 'to', 'in', 'on', 'at', 'as', 'by', 'and', 'or', 'it',
          'its', 'this', 'that', 'here'}
RULE_WORDS = 6
CONVERSION = re.compile(r'%[-+ #0]*[0-9*.]*[hlLqjzt]*.?')
# calls whose format is argument FMT_ARG (0-based); the _rule ones name their rule in argument 1
CALLS = {'error_at': 2, 'check_error': 2, 'diag_error_rule': 3, 'check_error_rule': 3}


def phase_of(path):
    base = os.path.basename(path)
    return PHASES.get(base, base.split('.')[0])


def kind_of(fmt):
    words = []
    for word in re.findall(r'[A-Za-z0-9_]+', CONVERSION.sub(' ', fmt)):
        word = word.lower().replace('_', '-')
        if word not in FILLER and len(words) < RULE_WORDS:
            words.append(word)
    return '-'.join(words) or 'error'


def c_string(body):
    """The value of a C string literal's body (escapes decoded)."""
    simple = {'n': '\n', 't': '\t', 'r': '\r', '0': '\0', '\\': '\\', '"': '"', "'": "'", '?': '?', 'a': '\a',
              'b': '\b', 'f': '\f', 'v': '\v'}
    return re.sub(r'\\(x[0-9a-fA-F]+|[0-7]{1,3}|.)',
                  lambda m: simple.get(m.group(1), chr(int(m.group(1)[1:], 16)) if m.group(1)[0] == 'x'
                                       else chr(int(m.group(1), 8)) if m.group(1)[0].isdigit() else m.group(1)),
                  body)


def arguments(text, start):
    """The top-level arguments of the call whose '(' is at text[start]."""
    args, depth, i, cur = [], 0, start, ''
    while i < len(text):
        ch = text[i]
        if ch in '"\'':
            m = re.compile(r'%s(?:[^%s\\]|\\.)*%s' % (ch, ch, ch), re.S).match(text, i)
            cur += m.group(0)
            i = m.end()
            continue
        if text.startswith('//', i):
            i = text.index('\n', i)
            continue
        if text.startswith('/*', i):
            i = text.index('*/', i) + 2
            continue
        if ch in '([{':
            depth += 1
            if depth == 1:
                i += 1
                continue
        elif ch in ')]}':
            depth -= 1
            if depth == 0:
                args.append(cur.strip())
                return args
        elif ch == ',' and depth == 1:
            args.append(cur.strip())
            cur = ''
            i += 1
            continue
        cur += ch
        i += 1
    raise ValueError('unterminated call')


def literals(arg):
    """The formats an argument can be: each run of adjacent string literals
    (`c ? "a" : "b"` has two)."""
    runs = re.findall(r'"(?:[^"\\]|\\.)*"(?:\s*"(?:[^"\\]|\\.)*")*', arg, re.S)
    return [''.join(c_string(s[1:-1]) for s in re.findall(r'"(?:[^"\\]|\\.)*"', run, re.S)) for run in runs]


def rules():
    """[(id, format, file)] of every error the sources report."""
    found = []
    for d in ('compiler', 'grammar'):
        for name in sorted(os.listdir(os.path.join(ROOT, d))):
            if not re.search(r'\.(c|y|re)$', name):
                continue
            path = os.path.join(ROOT, d, name)
            with open(path, encoding='utf-8') as f:
                text = f.read()
            for m in re.finditer(r'\b(%s)\s*\(' % '|'.join(CALLS), text):
                line = text.count('\n', 0, m.start()) + 1
                before = text[text.rfind('\n', 0, m.start()) + 1:m.start()]
                if '//' in before or '*' in before.strip()[:1] or re.match(r'\s*(#|void |static )', before):
                    continue  # a comment, a declaration or a definition
                args = arguments(text, m.end() - 1)
                fmts = literals(args[CALLS[m.group(1)]]) if len(args) > CALLS[m.group(1)] else []
                where = '%s/%s:%d' % (d, name, line)
                if not fmts:
                    sys.exit('%s: %s() without a literal format string: its rule id is unknown here' %
                             (where, m.group(1)))
                for fmt in fmts:
                    if m.group(1).endswith('_rule'):
                        rule = literals(args[1])
                        if len(rule) != 1:
                            sys.exit('%s: %s() needs a literal rule id' % (where, m.group(1)))
                        found.append((rule[0], fmt, where))
                    else:
                        found.append(('%s/%s' % (phase_of(name), kind_of(fmt)), fmt, where))
    return found


def table():
    rows = ['| rule id | message (`...` stands for a value) | reported in |', '|---|---|---|']
    for rule, fmt, where in sorted(rules(), key=lambda r: (r[0], r[2])):
        msg = re.sub('%%|' + CONVERSION.pattern, lambda m: '%' if m.group(0) == '%%' else '...', fmt)
        msg = msg.replace('|', '\\|').replace('`', "'")
        rows.append('| `%s` | %s | `%s` |' % (rule, msg, re.sub(r':\d+$', '', where)))
    return '\n'.join(rows)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith('--')]
    doc = args[0] if args else DOC
    if '--check' not in sys.argv and '--update' not in sys.argv:
        print(table())
        return
    with open(doc, encoding='utf-8') as f:
        text = f.read()
    if BEGIN not in text or END not in text:
        sys.exit('%s has no %s ... %s section' % (doc, BEGIN, END))
    head, rest = text.split(BEGIN, 1)
    new = head + BEGIN + '\n' + table() + '\n' + END + rest.split(END, 1)[1]
    if '--update' in sys.argv:
        if new != text:
            with open(doc, 'w', encoding='utf-8') as f:
                f.write(new)
            print('updated %s' % doc)
    elif new != text:
        import difflib
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), doc, 'sources'))
        sys.exit('FAIL: the rule catalogue in %s is out of date (an error message was added or reworded):\n'
                 '      python3 scripts/diag_rules.py --update   then review the diff' % doc)
    else:
        print('%s: the rule catalogue is up to date' % doc)


if __name__ == '__main__':
    main()
