#!/usr/bin/python3
"""sarif_check.py SPMDC [--rules DOC] DIR...: spmdc --diagnostics-format=sarif
says what the text diagnostics say, in valid SARIF 2.1.0.

For every .spmd file directly in each DIR (with its `// ARGS:` or `// RUN:`
first line, as errorcheck.py and golden.py read them; files run in another
mode than --check are left out), spmdc runs twice, with
text and with SARIF diagnostics, and:
  * the log has the structure SARIF 2.1.0 requires of what spmdc writes (the
    properties the schema marks required, their types, a ruleIndex naming its
    rule, regions with 1 <= start <= end inside the file; the schema itself is
    checked by tests/node/sarif_schema.js);
  * each result is the text's error: same message, file, line, column
    (counted in code points), and the same notes and help lines, a help with a
    fix replacing a region of the file with its code;
  * the exit status is the same;
  * each fix, applied to a copy of the file, removes its error: fewer errors
    with that message at that place are left, or none that offers that fix;
  * with --rules, every rule id is in DOC's catalogue (docs/diagnostics.md,
    which scripts/diag_rules.py computes from the sources).
"""
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import urllib.parse

LOC_RE = re.compile(r'^(?P<file>[^:\s][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<level>error|note): (?P<msg>.*)$')
BARE_RE = re.compile(r'^(?P<level>error|note|help): (?P<msg>.*)$')
RULE_RE = re.compile(r'^[a-z0-9_]+/[a-z0-9-]+$')
SNIPPET_RE = re.compile(r'^ *\d* \| ')


class Bad(Exception):
    pass


def need(cond, what):
    if not cond:
        raise Bad(what)


def args_of(path):
    """spmdc's arguments for the file, or None for a test of another mode."""
    with open(path, encoding='utf-8', errors='replace') as f:
        first = f.readline()
    name = os.path.basename(path)
    if first.startswith('// RUN:'):
        args = [a.replace('%s', name) for a in shlex.split(first[len('// RUN:'):])]
    elif first.startswith('// ARGS:'):
        args = shlex.split(first[len('// ARGS:'):]) + [name]
    else:
        args = ['--check', name]
    other = [a for a in args if a.startswith('-') and a.split('=')[0] not in ('--check', '-I', '-D', '--max-errors')
             and not re.match(r'^-[ID].', a)]
    return None if other or '--check' not in args else args


def run(spmdc, cwd, args):
    env = dict(os.environ)
    env['ASAN_OPTIONS'] = 'exitcode=99:detect_leaks=1'
    env.setdefault('UBSAN_OPTIONS', 'halt_on_error=1:exitcode=98:print_stacktrace=1')
    return subprocess.run([spmdc, '--color=never', '--max-errors=0'] + args, cwd=cwd, capture_output=True,
                          env=env, timeout=60)


def text_diagnostics(stderr):
    """The errors of a text run: [{file, line, col, msg, notes, helps}], and tool errors."""
    errors, tool = [], []
    for line in stderr.decode('utf-8', errors='replace').splitlines():
        m = LOC_RE.match(line) or BARE_RE.match(line)
        if line.startswith('spmdc: error: '):
            tool.append(line[len('spmdc: error: '):])
        elif SNIPPET_RE.match(line) or line.startswith('      |') or re.match(r'^\d+ errors$', line) \
                or line.startswith('spmdc: too many errors') or line.startswith('run \'spmdc --help\''):
            continue
        elif m and m.group('level') == 'error':
            d = m.groupdict()
            errors.append({'file': d.get('file'), 'line': int(d['line']) if d.get('line') else None,
                           'col': int(d['col']) if d.get('col') else None, 'msg': d['msg'], 'notes': [], 'helps': []})
        elif m and errors:
            d = m.groupdict()
            errors[-1]['notes' if d['level'] == 'note' else 'helps'].append(
                (d['msg'], d.get('file'), int(d['line']) if d.get('line') else None))
        else:
            raise Bad('text output line not understood: %r' % line)
    return errors, tool


def utf8_len(b, i):
    """Length of the valid UTF-8 sequence at b[i], or 0 (as sarif.c counts)."""
    c = b[i]
    if c < 0x80:
        return 1
    n = 4 if c >= 0xf0 else 3 if c >= 0xe0 else 2 if c >= 0xc2 else 0
    if n == 0 or i + n > len(b) or c > 0xf4:
        return 0
    if any(b[i + k] & 0xc0 != 0x80 for k in range(1, n)):
        return 0
    c1 = b[i + 1]
    if (c == 0xe0 and c1 < 0xa0) or (c == 0xed and c1 >= 0xa0) or (c == 0xf0 and c1 < 0x90) or \
            (c == 0xf4 and c1 >= 0x90):
        return 0
    return n


def code_points(b):
    i = n = 0
    while i < len(b):
        i += utf8_len(b, i) or 1
        n += 1
    return n


class Source:
    def __init__(self, path):
        with open(path, 'rb') as f:
            self.lines = f.read().split(b'\n')

    def cp_col(self, line, byte_col):
        return code_points(self.lines[line - 1][:byte_col - 1]) + 1

    def line_cps(self, line):
        return code_points(self.lines[line - 1])


def check_region(r, src, what):
    for k in ('startLine', 'startColumn', 'endLine', 'endColumn'):
        need(isinstance(r.get(k), int) and r[k] >= 1, '%s.%s must be an integer >= 1' % (what, k))
    need((r['startLine'], r['startColumn']) <= (r['endLine'], r['endColumn']), '%s ends before it starts' % what)
    need(r['endLine'] <= len(src.lines), '%s is past the end of the file' % what)
    for k in ('start', 'end'):
        line = r[k + 'Line']
        need(r[k + 'Column'] <= src.line_cps(line) + 1 + (k == 'end' and line < len(src.lines)),
             '%s.%sColumn is past the end of line %d' % (what, k, line))


def uri_path(loc, base):
    art = loc['physicalLocation']['artifactLocation']
    need(isinstance(art.get('uri'), str), 'artifactLocation.uri must be a string')
    uri = art['uri']
    if art.get('uriBaseId') is not None:
        need(art['uriBaseId'] in base, 'uriBaseId %r is not in originalUriBaseIds' % art['uriBaseId'])
        uri = urllib.parse.urljoin(base[art['uriBaseId']], uri)
    need(uri.startswith('file://'), 'a location that is not a file: URI: %s' % uri)
    return urllib.parse.unquote(uri[len('file://'):])


def apply_fix(text, rep):
    """text (a str: indices are code points) with the replacement applied."""
    lines = text.split('\n')

    def offset(line, col):
        return sum(len(x) + 1 for x in lines[:line - 1]) + col - 1
    reg = rep['deletedRegion']
    begin, end = offset(reg['startLine'], reg['startColumn']), offset(reg['endLine'], reg['endColumn'])
    return text[:begin] + rep['insertedContent']['text'] + text[end:]


def at(result):
    locs = result.get('locations')
    reg = locs[0]['physicalLocation']['region'] if locs else {}
    return result['message']['text'], reg.get('startLine'), reg.get('startColumn')


def fixes_of(result):
    """Each fix of result as (start of its region, its code)."""
    return {((r['deletedRegion']['startLine'], r['deletedRegion']['startColumn']), r['insertedContent']['text'])
            for f in result.get('fixes', []) for c in f['artifactChanges'] for r in c['replacements']}


def check_fix_removes_error(spmdc, cwd, args, name, result, fix, base):
    """Applies fix to a copy of the file (beside links to cwd's directories,
    for imports): fewer errors like result are left, or those left offer
    other fixes (max(p, p): fixing the first p leaves the same error for the
    second)."""
    change = fix['artifactChanges'][0]
    path = uri_path({'physicalLocation': change}, base)
    if os.path.realpath(path) != os.path.realpath(os.path.join(cwd, name)):
        return  # a fix in an imported module
    with open(path, encoding='utf-8', errors='surrogateescape') as f:
        text = f.read()
    for rep in change['replacements']:
        text = apply_fix(text, rep)

    def like(d):
        log = json.loads(run(spmdc, d, args + ['--diagnostics-format=sarif']).stdout.decode('utf-8'))
        return [r for r in log['runs'][0]['results'] if at(r) == at(result)]
    this = fixes_of({'fixes': [fix]})
    with tempfile.TemporaryDirectory() as tmp:
        for entry in os.listdir(cwd):
            if os.path.isdir(os.path.join(cwd, entry)):
                os.symlink(os.path.join(cwd, entry), os.path.join(tmp, entry))
        with open(os.path.join(tmp, name), 'w', encoding='utf-8', errors='surrogateescape') as f:
            f.write(text)
        left = like(tmp)
        need(len(left) < len(like(cwd)) or not any(this & fixes_of(r) for r in left),
             'the fix %r does not remove the error %r' % (fix['description']['text'], result['message']['text']))


def message(obj, what):
    need(isinstance(obj, dict) and isinstance(obj.get('text'), str), '%s must be a message with text' % what)
    return obj['text']


def check_file(spmdc, path, catalogue):
    cwd = os.path.dirname(os.path.realpath(path))
    args = args_of(path)
    if args is None:
        return False
    text = run(spmdc, cwd, args)
    sarif = run(spmdc, cwd, args + ['--diagnostics-format=sarif'])
    need(text.returncode in (0, 1, 2), 'text run exited %d: %s' % (text.returncode, text.stderr[-400:]))
    need(sarif.returncode == text.returncode,
         'exit status %d with SARIF, %d with text' % (sarif.returncode, text.returncode))
    errors, tool = text_diagnostics(text.stderr)
    try:
        log = json.loads(sarif.stdout.decode('utf-8'))
    except ValueError as e:
        raise Bad('standard output is not JSON: %s' % e)
    need(log.get('version') == '2.1.0' and isinstance(log.get('runs'), list) and len(log['runs']) == 1,
         'a log has version 2.1.0 and one run')
    run_ = log['runs'][0]
    driver = run_['tool']['driver']
    need(driver.get('name') == 'spmdc', 'tool.driver.name')
    rules = driver.get('rules', [])
    for rule in rules:
        need(RULE_RE.match(rule.get('id', '')), 'rule id %r is not phase/kind' % rule.get('id'))
        message(rule.get('shortDescription'), 'rule.shortDescription')
    need(len({r['id'] for r in rules}) == len(rules), 'a rule is listed twice')
    inv = run_['invocations'][0]
    need(isinstance(inv.get('executionSuccessful'), bool), 'invocation.executionSuccessful is required')
    need(inv.get('exitCode') == text.returncode, 'invocation.exitCode')
    notes = [message(n.get('message'), 'notification') for n in inv.get('toolExecutionNotifications', [])]
    for t in tool:
        need(t in notes, 'tool error %r is not a notification' % t)
    need(inv['executionSuccessful'] == (not tool and text.returncode != 2), 'executionSuccessful')
    need(run_.get('columnKind') == 'unicodeCodePoints', 'columnKind')
    base = {k: v['uri'] for k, v in run_.get('originalUriBaseIds', {}).items()}
    results = run_.get('results')
    need(isinstance(results, list), 'run.results')
    need(len(results) == len(errors), '%d results for %d errors' % (len(results), len(errors)))
    used = set()
    for r, e in zip(results, errors):
        where = 'result %r' % e['msg']
        need(r.get('level') == 'error', where + ': level')
        got = message(r.get('message'), where)
        need(got == e['msg'] or '\ufffd' in got + e['msg'], '%s: message is %r' % (where, got))
        need(RULE_RE.match(r.get('ruleId', '')), where + ': ruleId')
        need(rules[r['ruleIndex']]['id'] == r['ruleId'], where + ': ruleIndex names another rule')
        used.add(r['ruleId'])
        need(catalogue is None or r['ruleId'] in catalogue,
             '%s: rule %s is not in the catalogue (python3 scripts/diag_rules.py --update)' % (where, r['ruleId']))
        if e['file'] is None:
            need('locations' not in r, where + ': a location the text does not give')
        else:
            loc = r['locations'][0]
            p = uri_path(loc, base)
            need(os.path.realpath(p) == os.path.realpath(os.path.join(cwd, e['file'])), '%s: file %s' % (where, p))
            src = Source(p)
            reg = loc['physicalLocation']['region']
            check_region(reg, src, where + ' region')
            need(reg['startLine'] == e['line'] and reg['startColumn'] == src.cp_col(e['line'], e['col']),
                 '%s: starts at %d:%d, the text says %d:%d' % (where, reg['startLine'], reg['startColumn'],
                                                              e['line'], e['col']))
        related = r.get('relatedLocations', [])
        fixes = r.get('fixes', [])
        rel_notes = [message(x.get('message'), 'related') for x in related]
        got_notes = [m for m in rel_notes if not m.startswith('help: ')]
        got_helps = [m[len('help: '):] for m in rel_notes if m.startswith('help: ')]
        for f in fixes:
            got_helps.append(message(f.get('description'), 'fix.description'))
            changes = f.get('artifactChanges')
            need(isinstance(changes, list) and changes, 'fix.artifactChanges is required')
            for ch in changes:
                fsrc = Source(uri_path({'physicalLocation': ch}, base))
                reps = ch.get('replacements')
                need(isinstance(reps, list) and reps, 'artifactChange.replacements is required')
                for rep in reps:
                    check_region(rep['deletedRegion'], fsrc, 'deletedRegion')
                    code = message(rep.get('insertedContent'), 'insertedContent')
                    need(code in got_helps[-1], 'fix code %r is not in its help line' % code)
        need(sorted(got_notes) == sorted(n[0] for n in e['notes']),
             '%s: notes %r, the text has %r' % (where, got_notes, [n[0] for n in e['notes']]))
        need(sorted(got_helps) == sorted(h[0] for h in e['helps']),
             '%s: help lines %r, the text has %r' % (where, got_helps, [h[0] for h in e['helps']]))
        for x, n in zip([x for x in related if 'physicalLocation' in x], [n for n in e['notes'] if n[2]]):
            need(x['physicalLocation']['region']['startLine'] == n[2], '%s: note %r line' % (where, n[0]))
        for f in fixes:
            check_fix_removes_error(spmdc, cwd, args, os.path.basename(path), r, f, base)
    need(used == {r['id'] for r in rules}, 'rules listed that no result uses')
    return True


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    spmdc = os.path.abspath(sys.argv[1])
    dirs = sys.argv[2:]
    catalogue = None
    if dirs[0] == '--rules':
        with open(dirs[1], encoding='utf-8') as f:
            catalogue = set(re.findall(r'^\| `([^`]+)` \|', f.read(), re.M))
        dirs = dirs[2:]
    failed = n = 0
    for d in dirs:
        for name in sorted(os.listdir(d)):
            if not name.endswith('.spmd'):
                continue
            try:
                n += check_file(spmdc, os.path.join(d, name), catalogue)
            except (Bad, KeyError, IndexError, TypeError) as e:
                n += 1
                failed += 1
                print('FAIL %s: %s: %s' % (os.path.join(d, name), type(e).__name__, e))
    print('%d passed, %d failed' % (n - failed, failed))
    sys.exit(1 if failed else 0)


if __name__ == '__main__':
    main()
