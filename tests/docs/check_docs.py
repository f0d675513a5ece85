#!/usr/bin/python3
"""check_docs.py SPMDC DOC.md [--update] [-v]: every ```spmd block of a document, tested.

Used for docs/tutorial.md and docs/porting.md (ctest docs/tutorial,
docs/porting).  Each ```spmd block must be preceded by one or more test
annotations, HTML comments that a Markdown renderer does not show, each on
a line of its own:

    <!-- test: KIND [NAME] [of HOST] [key=value | key="value" | flag ...] -->

KIND says what is checked:

  check     spmdc --check accepts the program, silently.
  run       spmdc -O0 compiles it; it runs under mpirun on each mesh of
            meshes="dp=1 dp=2,tp=1 ..." (ranks: the product of the sizes,
            --mesh as given), exits 0, and its standard output on every mesh
            is exactly the expected text, or with rtol=X each number within
            that relative tolerance (the last digit of an f32 sum may differ
            between meshes).  ignore="REGEX": text matching
            REGEX is masked on both sides (timings).  shared-dir: the runs
            share one working directory, in order, and the expected text is
            their outputs one after the other (a checkpoint written by one
            run and read by the next).
  error     spmdc --check exits 1, and its standard error (the diagnostics)
            is exactly the expected text.  The file is NAME.spmd.
  output    spmdc flags="..." NAME.spmd exits 0 and its standard output is
            exactly the expected text (--dump-types, --comm-report);
            from="REGEX" drops what comes before the first line matching it.
  fragment  the same as check; for `fragment of HOST`.

The expected text of a run, error or output test is the next ```text block
after the ```spmd block (before any other ```spmd block) not taken by an
earlier annotation of the same block, so one program can have a run and an
output test, each followed by its text.  spmdc runs in a fresh directory
holding NAME.spmd, with --color=never and args="..." (e.g. "-D STEPS=3").

NAME names the program for later fragments and for the file name in
diagnostics (default: doc-LINE).  `of HOST` makes the block a fragment,
spliced into the program HOST (an earlier block, or a hidden program) before
it is checked; the result is the program NAME:

  * if HOST has a line `...`, the fragment replaces that line (indented
    like it);
  * else if the fragment starts with declarations (fn, struct, const,
    mesh, import, local, export; comments above one belong to it), each
    replaces HOST's declaration of the same name, or is added before
    `fn main`;
  * else its statements are added at the end of HOST's `fn main`.

With the flag `verbatim` the fragment must also be a verbatim part of HOST
(a quotation of a real file).  Hidden programs, for fragments that need
context the page does not show:

    <!-- test: program NAME file=PATH -->      (a file of the repository)
    <!-- test: program NAME
    ...a .spmd program, possibly with a `...` line...
    -->

Every fenced block must say its language (```spmd, ```text, ```sh,
```python, ...), so that no program goes untested for want of a label.  A
```spmd block without an annotation, an annotation not followed by one, a
run/error/output test without its ```text block, an unknown KIND, option or
HOST, or a name defined twice fail the test.  --update rewrites the expected
```text blocks that differ with what spmdc or the program printed (then
read them: it records whatever was printed).
"""
import concurrent.futures
import os
import re
import shlex
import subprocess
import sys
import tempfile

DECL_RE = re.compile(r"^(?:(?:export\s+)?(?:local\s+)?fn\s+(\w+)|struct\s+(\w+)|const\s+(\w+)|import\s+(\w+)|(mesh)\b)")
KINDS = ("check", "run", "error", "output", "fragment")
OPTIONS = ("args", "meshes", "ignore", "shared-dir", "flags", "verbatim", "file", "from", "rtol")
NUM_RE = re.compile(r"[-+]?(?:\d+\.?\d*(?:[eE][-+]?\d+)?|inf|nan)")
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
           OMPI_MCA_rmaps_base_oversubscribe="1", OPENBLAS_NUM_THREADS="1")
# The f32 GEMM library is otherwise chosen by timing at start-up, per machine
# (docs/runtime.md), and another library may round the last digit otherwise.
ENV.setdefault("SPMD_GEMM", "openblas")


class DocError(Exception):
    pass


class Block:
    """A fenced block: its language, text and the line of its opening fence (1-based)."""

    def __init__(self, lang, text, line, end):
        self.lang, self.text, self.line, self.end = lang, text, line, end


def parse_doc(lines):
    """The fenced blocks, annotations and hidden programs of a Markdown file, in order."""
    items = []
    i = 0
    while i < len(lines):
        line = lines[i]
        m = re.match(r"^(\s*)(```+|~~~+)\s*(\S*)\s*$", line)
        if m:
            indent, fence, lang = m.groups()
            j = i + 1
            body = []
            while j < len(lines) and not re.match(r"^\s*" + re.escape(fence) + r"\s*$", lines[j]):
                body.append(lines[j][len(indent):] if lines[j].startswith(indent) else lines[j].lstrip())
                j += 1
            if j == len(lines):
                raise DocError(f"{i + 1}: code block not closed")
            if not lang:
                raise DocError(f"{i + 1}: a code block without a language: write ```spmd (tested), "
                               "```text, ```sh, ```python, ...")
            items.append(("block", Block(lang, "\n".join(body) + "\n", i + 1, j + 1)))
            i = j + 1
            continue
        m = re.match(r"^\s*<!--\s*test:(.*)$", line)
        if m:
            rest = m.group(1)
            if rest.rstrip().endswith("-->"):
                ann = parse_annotation(rest.rstrip()[:-3], i + 1)
                if ann["kind"] == "program":
                    if not ann["name"] or "file" not in ann["opts"]:
                        raise DocError(f"{i + 1}: a one-line program is `program NAME file=PATH`")
                    items.append(("hidden", (ann["name"], None, i + 1, ann["opts"]["file"])))
                else:
                    items.append(("note", ann))
                i += 1
                continue
            head = parse_annotation(rest, i + 1)
            if head["kind"] != "program" or not head["name"]:
                raise DocError(f"{i + 1}: only `<!-- test: program NAME` may span several lines")
            j = i + 1
            body = []
            while j < len(lines) and lines[j].strip() != "-->":
                body.append(lines[j])
                j += 1
            if j == len(lines):
                raise DocError(f"{i + 1}: hidden program not closed with a line `-->`")
            items.append(("hidden", (head["name"], "\n".join(body) + "\n", i + 1, None)))
            i = j + 1
            continue
        if "<!--" in line and "test:" in line:
            raise DocError(f"{i + 1}: a test annotation must start its line")
        i += 1
    return items


def parse_annotation(text, line):
    try:
        words = shlex.split(text)
    except ValueError as e:
        raise DocError(f"{line}: bad test annotation: {e}")
    if not words:
        raise DocError(f"{line}: empty test annotation")
    kind = words.pop(0)
    if kind not in KINDS + ("program",):
        raise DocError(f"{line}: unknown test kind '{kind}' (one of {', '.join(KINDS)})")
    ann = {"kind": kind, "name": None, "host": None, "opts": {}, "line": line}
    if words and "=" not in words[0] and words[0] not in ("of",) + OPTIONS:
        ann["name"] = words.pop(0)
    if len(words) >= 2 and words[0] == "of":
        ann["host"] = words[1]
        words = words[2:]
    for w in words:
        k, eq, v = w.partition("=")
        if k not in OPTIONS:
            raise DocError(f"{line}: unknown option '{k}' (one of {', '.join(OPTIONS)})")
        ann["opts"][k] = v if eq else True
    if kind == "run" and "meshes" not in ann["opts"]:
        raise DocError(f"{line}: a run needs meshes=\"dp=1 dp=2 ...\"")
    if kind == "output" and "flags" not in ann["opts"]:
        raise DocError(f"{line}: an output test needs flags=\"--dump-types\" or the like")
    return ann


def split_decls(src):
    """Top-level declarations: [(key, text)], a declaration starting at column 0
    with its comment lines above it; key None for text between them."""
    lines = src.splitlines(keepends=True)
    starts = []
    for i, line in enumerate(lines):
        m = DECL_RE.match(line)
        if m:
            k = i
            while k > 0 and lines[k - 1].startswith("//") and (not starts or k - 1 >= starts[-1][1]):
                k -= 1
            name = next(g for g in m.groups() if g)
            starts.append((k, i, name))
    parts = []
    prev = 0
    for n, (k, i, name) in enumerate(starts):
        if k > prev:
            parts.append((None, "".join(lines[prev:k])))
        end = starts[n + 1][0] if n + 1 < len(starts) else len(lines)
        parts.append((name, "".join(lines[k:end])))
        prev = end
    if prev < len(lines):
        parts.append((None, "".join(lines[prev:])))
    return parts


def splice(host, frag):
    """The program HOST with the fragment FRAG put in (see the module's comment)."""
    hl = host.splitlines()
    for i, line in enumerate(hl):
        if line.strip() == "...":
            ind = line[:len(line) - len(line.lstrip())]
            body = [(ind + f if f.strip() else f) for f in frag.rstrip("\n").splitlines()]
            return "\n".join(hl[:i] + body + hl[i + 1:]) + "\n"
    first = next((ln for ln in frag.splitlines() if ln.strip() and not ln.strip().startswith("//")), "")
    if DECL_RE.match(first):
        parts = split_decls(host)
        for name, text in split_decls(frag):
            if name is None:
                continue
            for n, (hname, _) in enumerate(parts):
                if hname == name:
                    parts[n] = (name, text if text.endswith("\n\n") else text.rstrip("\n") + "\n\n")
                    break
            else:
                at = next((n for n, (hname, _) in enumerate(parts) if hname == "main"), len(parts))
                parts.insert(at, (name, text.rstrip("\n") + "\n\n"))
        return "".join(t for _, t in parts)
    parts = split_decls(host)
    for n, (name, text) in enumerate(parts):
        if name == "main":
            body = text.rstrip()
            if not body.endswith("}"):
                raise DocError("the host's fn main does not end with '}'")
            ind = "  "
            add = "\n".join((ind + f if f.strip() else f) for f in frag.rstrip("\n").splitlines())
            parts[n] = (name, body[:-1].rstrip("\n") + "\n" + add + "\n}\n" + text[len(text.rstrip()):])
            return "".join(t for _, t in parts)
    raise DocError("the host has no fn main to add the statements to")


def spmdc_cmd(spmdc, ann):
    return [spmdc, "--color=never"] + shlex.split(ann["opts"].get("args", ""))


def mask(text, ann):
    pat = ann["opts"].get("ignore")
    return re.sub(pat, "<ignored>", text) if pat else text


def same(got, want, ann):
    """Whether the outputs agree: exactly, or with rtol= every number to that
    relative tolerance and the text between the numbers exactly."""
    got, want = mask(got, ann), mask(want, ann)
    if "rtol" not in ann["opts"]:
        return got == want
    rtol = float(ann["opts"]["rtol"])
    if NUM_RE.sub("#", got) != NUM_RE.sub("#", want):
        return False
    for a, b in zip(NUM_RE.findall(got), NUM_RE.findall(want)):
        x, y = float(a), float(b)
        if not (x == y or abs(x - y) <= rtol * max(abs(x), abs(y))):
            return False
    return True


def check_program(spmdc, mpirun, name, src, ann, expected, tmp, verbose):
    """Runs one test; returns (ok, message, actual text or None)."""
    kind = ann["kind"]
    d = tempfile.mkdtemp(dir=tmp, prefix=name + ".")
    path = os.path.join(d, name + ".spmd")
    with open(path, "w") as f:
        f.write(src)
    if kind in ("check", "fragment"):
        r = subprocess.run(spmdc_cmd(spmdc, ann) + ["--check", name + ".spmd"], cwd=d,
                           capture_output=True, text=True)
        if r.returncode != 0 or r.stdout or r.stderr:
            return False, f"spmdc --check exit {r.returncode}:\n{r.stdout}{r.stderr}", None
        return True, "", None
    if kind == "error":
        r = subprocess.run(spmdc_cmd(spmdc, ann) + ["--check", name + ".spmd"], cwd=d,
                           capture_output=True, text=True)
        if r.returncode != 1:
            return False, f"spmdc --check exit {r.returncode}, expected 1:\n{r.stdout}{r.stderr}", None
        return r.stderr == expected, "the diagnostics differ", r.stderr
    if kind == "output":
        r = subprocess.run(spmdc_cmd(spmdc, ann) + shlex.split(ann["opts"]["flags"]) + [name + ".spmd"],
                           cwd=d, capture_output=True, text=True)
        if r.returncode != 0:
            return False, f"spmdc exit {r.returncode}:\n{r.stdout}{r.stderr}", None
        got = r.stdout
        if "from" in ann["opts"]:
            m = re.search(ann["opts"]["from"], got, re.M)
            got = got[m.start():] if m else ""
        return same(got, expected, ann), "the output differs", got
    # run
    os.makedirs(os.path.join(d, "bin"))
    prog = os.path.join(d, "bin", name)      # not in the runs' directory
    r = subprocess.run(spmdc_cmd(spmdc, ann) + ["-O0", name + ".spmd", "-o", prog], cwd=d,
                       capture_output=True, text=True)
    if r.returncode != 0:
        return False, f"spmdc exit {r.returncode}:\n{r.stdout}{r.stderr}", None
    outs = []
    shared = "shared-dir" in ann["opts"]
    for n, mesh in enumerate(ann["opts"]["meshes"].split()):
        sizes = [int(kv.partition("=")[2]) for kv in mesh.split(",")]
        ranks = 1
        for s in sizes:
            ranks *= s
        wd = os.path.join(d, "run" if shared else f"run{n}")
        os.makedirs(wd, exist_ok=True)
        cmd = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", str(ranks), prog, "--mesh", mesh]
        if verbose:
            print("  $ " + " ".join(cmd))
        try:
            r = subprocess.run(cmd, cwd=wd, env=ENV, capture_output=True, text=True, timeout=120)
        except subprocess.TimeoutExpired:
            return False, f"timed out on --mesh {mesh}", None
        if r.returncode != 0:
            return False, f"exit {r.returncode} on --mesh {mesh}:\n{r.stdout}{r.stderr}", None
        if shared:
            outs.append(r.stdout)
        elif not same(r.stdout, expected, ann):
            return False, f"the output on --mesh {mesh} differs", r.stdout
        else:
            outs = [r.stdout]
    got = "".join(outs)
    return same(got, expected, ann), "the output differs", got


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("-")]
    update, verbose = "--update" in sys.argv, "-v" in sys.argv   # --list: parse only
    if len(args) != 2:
        sys.exit(__doc__)
    spmdc, doc = os.path.abspath(args[0]), args[1]
    mpirun = os.environ.get("MPIRUN", "mpirun")
    with open(doc) as f:
        lines = f.read().splitlines()
    try:
        items = parse_doc(lines)
    except DocError as e:
        sys.exit(f"{doc}:{e}")

    root = os.path.dirname(os.path.dirname(os.path.abspath(doc)))   # DOC is in docs/
    programs = {}            # name -> source
    tests = []               # (name, src, ann, block, expected text block or None)
    errors = []
    pending = []             # the annotations of the next ```spmd block
    used = set()             # text blocks already taken as expected output
    for n, (what, x) in enumerate(items):
        if what == "hidden":
            name, src, line, path = x
            if path is not None:
                try:
                    with open(os.path.join(root, path)) as f:
                        src = f.read()
                except OSError as e:
                    errors.append(f"{doc}:{line}: program '{name}': {e}")
                    continue
            if name in programs:
                errors.append(f"{doc}:{line}: program '{name}' defined twice")
            programs[name] = src
            continue
        if what == "note":
            pending.append(x)
            continue
        block = x
        if block.lang != "spmd":
            if pending:
                errors.append(f"{doc}:{pending[0]['line']}: test annotation not followed by a ```spmd block")
                pending = []
            continue
        if not pending:
            errors.append(f"{doc}:{block.line}: ```spmd block without a test annotation "
                          "(<!-- test: check|run|error|output|fragment ... --> on the line before)")
            continue
        anns, pending = pending, []
        names = [a["name"] for a in anns if a["name"]]
        hosts = {a["host"] for a in anns}
        if len(names) > 1 or len(hosts) > 1:
            errors.append(f"{doc}:{anns[0]['line']}: the annotations of one block name one program and one host")
            continue
        name = names[0] if names else f"doc-{block.line}"
        host = hosts.pop()
        if any(a["kind"] == "fragment" for a in anns) and not host:
            errors.append(f"{doc}:{anns[0]['line']}: a fragment needs `of HOST`")
            continue
        src = block.text
        if host:
            if host not in programs:
                errors.append(f"{doc}:{anns[0]['line']}: no program '{host}' before this fragment")
                continue
            if any("verbatim" in a["opts"] for a in anns) and block.text not in programs[host]:
                errors.append(f"{doc}:{block.line}: this fragment is not a verbatim part of '{host}'")
            try:
                src = splice(programs[host], block.text)
            except DocError as e:
                errors.append(f"{doc}:{block.line}: {e}")
                continue
        if names:
            if name in programs:
                errors.append(f"{doc}:{anns[0]['line']}: program '{name}' defined twice")
            programs[name] = src
        for ann in anns:
            expected = None
            if ann["kind"] in ("run", "error", "output"):
                for m, (what2, y) in enumerate(items[n + 1:], n + 1):
                    if what2 == "block" and y.lang == "spmd":
                        break
                    if what2 == "block" and y.lang == "text" and m not in used:
                        expected = y
                        used.add(m)
                        break
                if expected is None:
                    errors.append(f"{doc}:{block.line}: the '{ann['kind']}' test needs a ```text block "
                                  "with the expected output after the ```spmd block")
                    continue
            tests.append((name, src, ann, block, expected))
    if pending:
        errors.append(f"{doc}:{pending[0]['line']}: test annotation not followed by a ```spmd block")

    if "--list" in sys.argv:
        for name, src, ann, block, expected in tests:
            print(f"{doc}:{block.line}: {ann['kind']} {name}" + (f" of {ann['host']}" if ann["host"] else "")
                  + (f" -> text at {expected.line}" if expected else ""))
        if "-v" in sys.argv:
            for name, src, ann, block, expected in tests:
                if ann["host"]:
                    print(f"==== {name}\n{src}")
        print("\n".join(errors))
        return
    updates = {}
    # the runs mostly wait for mpirun to start: a few at a time (SPMD_DOCS_JOBS)
    jobs = int(os.environ.get("SPMD_DOCS_JOBS", "3"))
    with tempfile.TemporaryDirectory(prefix="check_docs.") as tmp:
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
            results = list(pool.map(
                lambda t: check_program(spmdc, mpirun, t[0], t[1], t[2], t[4].text if t[4] else "", tmp, verbose),
                tests))
        for (name, src, ann, block, expected), (ok, msg, got) in zip(tests, results):
            want = expected.text if expected else ""
            where = f"{doc}:{block.line}: {ann['kind']} {name}" + (f" of {ann['host']}" if ann["host"] else "")
            if ok:
                print(f"ok   {where}")
                continue
            if update and got is not None and expected is not None:
                updates[expected.line] = (expected.end, got)
                print(f"UPD  {where}")
                continue
            errors.append(f"{where}: {msg}")
            if got is not None and expected is not None:
                errors.append("--- expected (line %d)\n%s--- got\n%s" % (expected.line, want, got))
            if ann["host"] or verbose:
                errors.append("--- the program checked\n" + src)
    if updates:
        out = []
        i = 0
        while i < len(lines):
            if i + 1 in updates:
                end, got = updates[i + 1]
                out.append(lines[i])
                out.extend(got.rstrip("\n").split("\n") if got else [])
                i = end - 1
            out.append(lines[i])
            i += 1
        with open(doc, "w") as f:
            f.write("\n".join(out) + "\n")
        print(f"updated {len(updates)} text blocks of {doc}: read them")
    if errors:
        print("\n".join(errors))
        sys.exit(f"FAIL: {doc}")
    print(f"{doc}: {len(tests)} blocks tested")


if __name__ == "__main__":
    main()
