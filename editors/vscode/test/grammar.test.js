// grammar.test.js NODE_MODULES REPO: the TextMate grammar for .spmd files
// (syntaxes/spmd.tmLanguage.json), tokenised by the engine VS Code uses
// (vscode-textmate over vscode-oniguruma's WebAssembly regex engine):
//   * the scope assertions in sample.spmd hold (`//  ^^^ scope` under a
//     line, `// <- scope` for its first token);
//   * every keyword, dtype and type letter of grammar/lexer.re is scoped as
//     a keyword, a type or a constant, and every built-in of
//     compiler/ops.def, called, as a collective, an autodiff or another
//     built-in function, so the grammar keeps up with the language;
//   * every program of the repository (examples, stdlib, tests) tokenises
//     with no word left without a scope of its own.
'use strict';
const fs = require('fs');
const path = require('path');

const [modulesArg, repo] = process.argv.slice(2);
const modules = path.resolve(modulesArg || '');
const vsctm = require(path.join(modules, 'vscode-textmate'));
const oniguruma = require(path.join(modules, 'vscode-oniguruma'));
const here = __dirname;
const grammarPath = path.join(here, '..', 'syntaxes', 'spmd.tmLanguage.json');

let failures = 0, checks = 0;
function fail(msg) {
  failures++;
  console.log('FAIL ' + msg);
}

async function loadGrammar() {
  const wasm = fs.readFileSync(path.join(modules, 'vscode-oniguruma', 'release', 'onig.wasm')).buffer;
  await oniguruma.loadWASM(wasm);
  const registry = new vsctm.Registry({
    onigLib: Promise.resolve({
      createOnigScanner: (sources) => new oniguruma.OnigScanner(sources),
      createOnigString: (s) => new oniguruma.OnigString(s),
    }),
    loadGrammar: async (scope) =>
      scope === 'source.spmd' ? vsctm.parseRawGrammar(fs.readFileSync(grammarPath, 'utf8'), grammarPath) : null,
  });
  return registry.loadGrammar('source.spmd');
}

// [[{startIndex, endIndex, scopes}]] per line of text.
function tokenize(grammar, text) {
  let stack = vsctm.INITIAL;
  return text.split('\n').map((line) => {
    const r = grammar.tokenizeLine(line, stack);
    stack = r.ruleStack;
    return r.tokens.map((t) => ({ ...t, endIndex: Math.min(t.endIndex, line.length) }));
  });
}

function tokenAt(tokens, col) {
  return tokens.find((t) => t.startIndex <= col && col < t.endIndex);
}

function checkAssertions(grammar, file) {
  const lines = fs.readFileSync(file, 'utf8').split('\n');
  const toks = tokenize(grammar, lines.join('\n'));
  let target = -1;
  lines.forEach((line, n) => {
    const caret = /^(\s*\/\/)(\s*)(\^+)\s+(\S.*)$/.exec(line);
    const first = /^\s*\/\/\s*<-\s+(\S.*)$/.exec(line);
    if (!caret && !first) {
      target = n;
      return;
    }
    const want = (caret ? caret[4] : first[1]).trim().split(/\s+/);
    const cols = [];
    if (caret) {
      const from = caret[1].length + caret[2].length;
      for (let c = from; c < from + caret[3].length; c++) cols.push(c);
    } else {
      cols.push(lines[target].search(/\S/));
    }
    for (const c of cols) {
      checks++;
      const t = tokenAt(toks[target], c);
      const where = `${path.basename(file)}:${target + 1}:${c + 1} '${lines[target].slice(c, c + 12)}'`;
      if (!t) {
        fail(`${where}: no token`);
        continue;
      }
      for (const s of want)
        if (!t.scopes.includes(s))
          fail(`${where}: expected scope ${s}, got ${t.scopes.join(' ')}`);
    }
  });
}

function scopesOf(grammar, line, word) {
  const col = line.indexOf(word);
  const t = tokenAt(tokenize(grammar, line)[0], col);
  return t ? t.scopes : [];
}

// The keywords of the lexer (re2c rules `"word" { ... }`) and the built-ins
// of ops.def (OP(ID, "name", class, ...)).
function checkLanguage(grammar) {
  const lexer = fs.readFileSync(path.join(repo, 'grammar', 'lexer.re'), 'utf8');
  const words = [...lexer.matchAll(/^\s*"([A-Za-z_][A-Za-z0-9_]*)"\s*\{/gm)].map((m) => m[1]);
  if (words.length < 20)
    fail(`found only ${words.length} keywords in grammar/lexer.re`);
  for (const w of words) {
    checks++;
    const line = w === 'S' ? 'S(0)' : w;
    const scopes = scopesOf(grammar, line, w).join(' ');
    if (!/\b(keyword|storage|constant\.language)\./.test(scopes))
      fail(`keyword '${w}' of lexer.re is scoped '${scopes}'`);
  }
  const ops = fs.readFileSync(path.join(repo, 'compiler', 'ops.def'), 'utf8');
  const builtins = [...ops.matchAll(/^OP\(\w+,\s*"(\w+)",\s*(\w+)/gm)];
  if (builtins.length < 40)
    fail(`found only ${builtins.length} built-ins in compiler/ops.def`);
  for (const [, name, cls] of builtins) {
    checks++;
    const want = cls === 'OPC_COLLECTIVE' ? 'support.function.collective.spmd'
      : cls === 'OPC_AUTODIFF' ? 'support.function.autodiff.spmd' : 'support.function.builtin.spmd';
    const scopes = scopesOf(grammar, `  let y = ${name}(x, tp);`, name);
    if (!scopes.includes(want))
      fail(`built-in ${name}() (${cls}) is scoped '${scopes.join(' ')}', expected ${want}`);
  }
}

function spmdFiles(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== 'node_modules' && !e.name.startsWith('.') && !e.name.startsWith('build'))
      spmdFiles(p, out);
    else if (e.isFile() && e.name.endsWith('.spmd'))
      out.push(p);
  }
  return out;
}

// Every name and number of every program has a scope besides source.spmd
// (whatever the program: the corpus holds broken programs on purpose).
function checkCorpus(grammar) {
  const files = ['examples', 'stdlib', 'tests', 'editors'].flatMap((d) =>
    fs.existsSync(path.join(repo, d)) ? spmdFiles(path.join(repo, d), []) : []);
  let lines = 0;
  const t0 = Date.now();
  for (const f of files) {
    const text = fs.readFileSync(f, 'utf8');
    const toks = tokenize(grammar, text);
    text.split('\n').forEach((line, n) => {
      lines++;
      for (const t of toks[n]) {
        const s = line.slice(t.startIndex, t.endIndex);
        // a name, or a number, standing alone (not inside a malformed token
        // such as 12abc, which some syntax tests hold on purpose)
        if (t.scopes.length < 2 && /(?<![\w\u0080-\uffff])(?:[A-Za-z_]\w*|\d+)(?![\w\u0080-\uffff])/.test(s) &&
            !/\d[A-Za-z_]|[A-Za-z_\d][\u0080-\uffff]|[\u0080-\uffff][A-Za-z_\d]/.test(s))
          fail(`${path.relative(repo, f)}:${n + 1}: '${s}' has no scope`);
      }
    });
  }
  checks++;
  console.log(`tokenised ${files.length} programs (${lines} lines) in ${Date.now() - t0} ms`);
  if (files.length < 100)
    fail(`found only ${files.length} .spmd files under ${repo}`);
}

loadGrammar().then((grammar) => {
  checkAssertions(grammar, path.join(here, 'sample.spmd'));
  checkLanguage(grammar);
  checkCorpus(grammar);
  console.log(`${checks - failures} passed, ${failures} failed`);
  process.exit(failures ? 1 : 0);
}).catch((e) => {
  console.log('FAIL ' + (e.stack || e));
  process.exit(1);
});
