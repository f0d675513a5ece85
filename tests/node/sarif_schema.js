// sarif_schema.js NODE_MODULES SPMDC FILE...: spmdc's SARIF logs are valid
// against the SARIF 2.1.0 JSON schema (the schema Microsoft publishes in
// @microsoft/jest-sarif, checked with ajv).  Each FILE is either a golden
// output (NAME.out, whose standard output section is a SARIF log) or a .spmd
// program, which spmdc checks with --diagnostics-format=sarif (with the
// `// ARGS:` of its first line).  tests/sarif_check.py checks what the logs
// say; this checks their form.
'use strict';
const fs = require('fs');
const path = require('path');
const { spawnSync } = require('child_process');

const [modulesArg, spmdc, ...files] = process.argv.slice(2);
const modules = path.resolve(modulesArg || '');
const Ajv = require(path.join(modules, 'ajv'));
const schema = require(path.join(modules, '@microsoft/jest-sarif/lib/schemas/sarif-2.1.0-rtm.5.json'));
const ajv = new Ajv({ schemaId: 'auto', allErrors: true, jsonPointers: true });
ajv.addMetaSchema(require(path.join(modules, 'ajv/lib/refs/json-schema-draft-04.json')));
const validate = ajv.compile(schema);

// The log a file stands for, as text, or null for a golden that holds none.
function logOf(file) {
  if (file.endsWith('.out')) {
    const text = fs.readFileSync(file, 'utf8');
    const out = text.split('--- stdout\n')[1].split('--- stderr\n')[0];
    return out.trim().startsWith('{') ? out : null;
  }
  const first = fs.readFileSync(file, 'utf8').split('\n')[0];
  const args = first.startsWith('// ARGS:') ? first.slice(8).trim().split(/\s+/) : ['--check'];
  const p = spawnSync(path.resolve(spmdc), ['--diagnostics-format=sarif', '--max-errors=0', ...args, path.basename(file)],
                      { cwd: path.dirname(file), encoding: 'utf8', env: { ...process.env, ASAN_OPTIONS: 'detect_leaks=1' } });
  if (p.status !== 0 && p.status !== 1)
    throw new Error(`spmdc exited ${p.status}: ${p.stderr}`);
  return p.stdout;
}

let passed = 0, failed = 0, results = 0, fixes = 0;
for (const file of files) {
  try {
    const text = logOf(file);
    if (text === null)
      continue;
    const log = JSON.parse(text);
    if (!validate(log))
      throw new Error(ajv.errorsText(validate.errors, { separator: '\n  ' }));
    for (const r of log.runs[0].results) {
      results++;
      fixes += (r.fixes || []).length;
    }
    passed++;
  } catch (e) {
    failed++;
    console.log(`FAIL ${file}:\n  ${e.message}`);
  }
}
console.log(`${results} results with ${fixes} fixes checked against the SARIF 2.1.0 schema`);
console.log(`${passed} passed, ${failed} failed`);
process.exit(failed || passed === 0 ? 1 : 0);
