#!/usr/bin/env python3
"""faults.py SPMDC TEST: faults injected on purpose into compiled programs
(tests/README.md, label `faults`).  TEST is one of:

  kill_rank      SIGKILL one rank mid-training: the job ends within 10 s with
                 a message naming the rank
  ckpt_killed    SIGKILL the job while it writes a checkpoint (a temporary
                 file exists): the previous checkpoint loads, complete
  ckpt_notdir    the checkpoint directory is a regular file: every rank
                 reports the failed save, no hang
  ckpt_readonly  a read-only checkpoint directory (a tmpfs mounted ro in a
                 private mount namespace, `unshare -m`): every rank reports
  ckpt_full      a full disk (a 64 KiB tmpfs, same way): every rank reports
  npy            .npy files with a bad magic, header, dtype, shape, fortran
                 order, truncated data, a huge declared size or header
                 length: a clear error naming the file, no crash
  mesh           --mesh with a bad size, a product other than the world
                 size, an unknown or repeated axis: a clear error

Exit 0 pass, 1 fail, 77 skipped (printed reason: e.g. no CAP_SYS_ADMIN for
a mount namespace).  Programs run under mpirun with a timeout; every
process the test started is killed on every exit path.
"""
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
SKIP = 77
ENV = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT='1', OMPI_ALLOW_RUN_AS_ROOT_CONFIRM='1',
           OMPI_MCA_rmaps_base_oversubscribe='1', OPENBLAS_NUM_THREADS='1')
ENV['ASAN_OPTIONS'] = ENV.get('ASAN_OPTIONS', '') + ':detect_leaks=0'


class Fail(Exception):
    pass


class Skip(Exception):
    pass


def mpirun(np_, prog, *args):
    return ['mpirun', '--oversubscribe', '-np', str(np_), prog] + list(args)


def session_pids(sid):
    """Processes of session sid (mpirun, its daemons and the ranks)."""
    out = []
    for d in os.listdir('/proc'):
        if d.isdigit():
            try:
                with open('/proc/%s/stat' % d) as f:
                    fields = f.read().rsplit(')', 1)[1].split()
                if int(fields[3]) == sid:
                    out.append(int(d))
            except (OSError, IndexError, ValueError):
                pass
    return out


def kill_session(sid):
    for pid in session_pids(sid):
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


class Job:
    """A command in its own session, output to a file; killed on exit."""

    def __init__(self, cmd, cwd):
        self.out_path = os.path.join(cwd, 'job.%d.out' % time.monotonic_ns())
        self.out = open(self.out_path, 'w')
        self.p = subprocess.Popen(cmd, cwd=cwd, env=ENV, stdout=self.out, stderr=subprocess.STDOUT,
                                  start_new_session=True)

    def text(self):
        with open(self.out_path, errors='replace') as f:
            return f.read()

    def wait_for(self, pattern, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if re.search(pattern, self.text(), re.M):
                return True
            if self.p.poll() is not None:
                return bool(re.search(pattern, self.text(), re.M))
            time.sleep(0.05)
        return False

    def close(self):
        if self.p.poll() is None:
            kill_session(self.p.pid)
            self.p.wait()
        kill_session(self.p.pid)  # any orphan left
        self.out.close()


def run(cmd, cwd, timeout=60):
    job = Job(cmd, cwd)
    try:
        job.p.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        job.close()
        raise Fail('timed out after %d s (a hang): %s\n%s' % (timeout, ' '.join(cmd), job.text()[-3000:]))
    job.close()
    return job.p.returncode, job.text()


def compile_(spmdc, name, work, *defs):
    exe = os.path.join(work, name + ''.join('_' + d.replace('=', '') for d in defs))
    args = [spmdc]
    for d in defs:
        args += ['-D', d]
    r = subprocess.run(args + [os.path.join(HERE, name + '.spmd'), '-o', exe], capture_output=True, text=True)
    if r.returncode != 0:
        raise Fail('spmdc failed on %s:\n%s' % (name, r.stderr))
    return exe


def sanitizer_report(text):
    return re.search(r'AddressSanitizer|UndefinedBehaviorSanitizer|runtime error:|Segmentation fault|'
                     r'signal 11|core dumped', text)


# ---------------------------------------------------------------- tests

def t_kill_rank(spmdc, work):
    prog = compile_(spmdc, 'train', work, 'SAVE=0', 'N=4096')
    job = Job(mpirun(4, prog), work)
    try:
        if not job.wait_for(r'^step 20 ', 60):
            raise Fail('the training did not start:\n' + job.text()[-3000:])
        victim = None
        for pid in session_pids(job.p.pid):
            try:
                env = open('/proc/%d/environ' % pid, 'rb').read().split(b'\0')
                exe = os.readlink('/proc/%d/exe' % pid)
            except OSError:
                continue
            if b'OMPI_COMM_WORLD_RANK=1' in env and os.path.basename(exe) == os.path.basename(prog):
                victim = pid
        if victim is None:
            raise Fail('rank 1 not found among the processes of the job')
        t0 = time.time()
        os.kill(victim, signal.SIGKILL)
        try:
            job.p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            raise Fail('the job still runs 10 s after rank 1 was killed:\n' + job.text()[-2000:])
        took = time.time() - t0
        out = job.text()
        if job.p.returncode == 0:
            raise Fail('the job exited 0 after a rank was killed')
        if not re.search(r'rank 1\b', out):
            raise Fail('no message names rank 1:\n' + out[-3000:])
        print('ok: rank 1 killed; the job ended in %.1f s (exit %d):' % (took, job.p.returncode))
        print('\n'.join(l for l in out.splitlines() if 'rank 1' in l))
    finally:
        job.close()


def read_ckpt(check, work):
    rc, out = run(mpirun(2, check), work)
    if rc != 0:
        raise Fail('the checkpoint does not load:\n' + out[-3000:])
    m = re.search(r'sum (\S+) sumsq (\S+)', out)
    s, q = float(m.group(1)), float(m.group(2))
    n = 262144
    c = round(s / n)   # print() shows 6 digits: a torn file is off by far more
    if c < 1 or abs(s - n * c) > 1e-5 * s or abs(q - n * c * c) > 1e-5 * q:
        raise Fail('the checkpoint is not one step\'s: sum %r sumsq %r' % (s, q))
    return int(c)


def t_ckpt_killed(spmdc, work):
    train = compile_(spmdc, 'train', work)
    check = compile_(spmdc, 'check', work)
    ck = os.path.join(work, 'ckpt')
    os.mkdir(ck)
    hits = 0
    for attempt in range(3):
        job = Job(mpirun(2, train), work)
        try:
            # wait for a complete checkpoint, then for the next one's temporary
            if not job.wait_for(r'^step 2 ', 60):
                raise Fail('the training did not start:\n' + job.text()[-3000:])
            end = time.time() + 30
            tmp = None
            while time.time() < end and tmp is None:
                tmps = [f for f in os.listdir(ck) if f.startswith('w.npy.')]
                if tmps and os.path.exists(os.path.join(ck, 'w.npy')):
                    tmp = tmps[0]
                else:
                    time.sleep(0.001)
            if tmp is None:
                raise Fail('never saw a checkpoint being written')
            kill_session(job.p.pid)
            job.p.wait()
        finally:
            job.close()
        step = read_ckpt(check, work)
        hits += 1
        print('ok: killed while %s was being written; ckpt/w.npy loads: the checkpoint of step %d' % (tmp, step - 1))
        for f in os.listdir(ck):   # a killed job leaves its temporary; the next run ignores it
            if f != 'w.npy':
                os.remove(os.path.join(ck, f))


def expect_error(rc, out, nranks, pattern):
    """A failure with the message on each of nranks ranks (None: on some rank;
    the first rank to stop may take the others down before they print)."""
    if rc == 0:
        raise Fail('exit 0, expected a failure:\n' + out[-3000:])
    if sanitizer_report(out):
        raise Fail('crashed:\n' + out[-3000:])
    for r in range(nranks or 1):
        rank = r'\d+' if nranks is None else str(r)
        # the .spmd line being run comes first (none for --mesh, before any)
        if not re.search(r'spmd: error: \[rank %s\] (?:\S+\.spmd:\d+: )?%s' % (rank, pattern), out):
            raise Fail('rank %s does not report /%s/:\n%s' % (rank, pattern, out[-3000:]))
    print('ok: %s reports it:' % ('every rank' if nranks else 'a rank'))
    print('\n'.join(l for l in out.splitlines() if 'spmd: error' in l))


def t_ckpt_notdir(spmdc, work):
    train = compile_(spmdc, 'train', work, 'STEPS=2')
    open(os.path.join(work, 'ckpt'), 'w').close()
    rc, out = run(mpirun(2, train), work)
    expect_error(rc, out, 2, r"save 'ckpt/w\.npy': cannot create directory 'ckpt': it exists and is not a directory")


def in_mount_ns(work, mount_opts, cmd):
    """cmd inside `unshare -m` with a tmpfs mounted on work/ckpt."""
    if not shutil.which('unshare'):
        raise Skip('no unshare(1)')
    ck = os.path.join(work, 'ckpt')
    os.makedirs(ck, exist_ok=True)
    probe = subprocess.run(['unshare', '-m', 'sh', '-c', 'mount -t tmpfs -o %s tmpfs %s' % (mount_opts, ck)],
                           capture_output=True, text=True)
    if probe.returncode != 0:
        raise Skip('cannot mount a tmpfs in a private mount namespace (needs CAP_SYS_ADMIN): ' +
                   probe.stderr.strip())
    script = 'mount --make-rprivate / 2>/dev/null; mount -t tmpfs -o %s tmpfs %s && exec %s' % (
        mount_opts, ck, ' '.join("'%s'" % c for c in cmd))
    return run(['unshare', '-m', 'sh', '-c', script], work)


def t_ckpt_readonly(spmdc, work):
    train = compile_(spmdc, 'train', work, 'STEPS=2')
    rc, out = in_mount_ns(work, 'ro,size=1m', mpirun(2, train))
    expect_error(rc, out, 2, r"save 'ckpt/w\.npy': cannot create a temporary file 'ckpt/w\.npy\.tmp\.\w+': Read-only file system")


def t_ckpt_full(spmdc, work):
    train = compile_(spmdc, 'train', work, 'STEPS=2')
    rc, out = in_mount_ns(work, 'size=64k', mpirun(2, train))
    expect_error(rc, out, 2, r"save 'ckpt/w\.npy': 'ckpt/w\.npy\.tmp\.\w+' has \d+ of 2097280 bytes after writing: is the disk full\?")
    if re.search(r'^step ', out, re.M):
        raise Fail('a save into a full directory went on as if it had worked:\n' + out[-2000:])


def npy(descr="'<f8'", shape='(8,)', fortran='False', data=None, version=1, hlen=None, magic=b'\x93NUMPY'):
    d = "{'descr': %s, 'fortran_order': %s, 'shape': %s, }" % (descr, fortran, shape)
    h = d.encode()
    pad = 64 - (10 + len(h) + 1) % 64
    h += b' ' * pad + b'\n'
    n = len(h) if hlen is None else hlen
    head = magic + bytes([version, 0]) + (struct.pack('<H', n) if version == 1 else struct.pack('<I', n))
    if data is None:
        data = struct.pack('<8d', *range(8))
    return head + h + data


NPY_CASES = [
    ('magic', npy(magic=b'\x93NUMPX'), r"not a \.npy file \(bad magic\)"),
    ('empty', b'', r"not a \.npy file \(bad magic\)"),
    ('version', npy(version=7), r"unsupported \.npy version 7\.0"),
    ('header_truncated', npy()[:40], r"truncated header"),
    ('header_length_huge', npy(version=2, hlen=0xFFFFFFF0), r"header too long"),
    ('no_descr', npy(descr="'<f8'").replace(b"'descr'", b"'dexcr'"), r"malformed header: header has no 'descr'"),
    ('dtype', npy(descr="'<f4'", data=struct.pack('<8f', *range(8))), r"dtype is '<f4', expected '<f8' \(f64\)"),
    ('dtype_big_endian', npy(descr="'>f8'"), r"dtype is '>f8', expected '<f8'"),
    ('shape', npy(shape='(4, 2)'), r"shape is \(4, 2\), expected \(8,\)"),
    ('shape_negative', npy(shape='(-8,)'), r"malformed header: header 'shape' is malformed"),
    ('shape_huge', npy(shape='(1099511627776,)'), r"shape is \(1099511627776,\), expected \(8,\)"),
    ('shape_overflow', npy(shape='(99999999999999999999999,)'), r"malformed header: header 'shape' is malformed"),
    ('fortran', npy(fortran='True'), r"fortran_order arrays are not supported"),
    ('truncated_data', npy()[:-20], r"file is truncated \(\d+ bytes, expected \d+\)"),
]


def t_npy(spmdc, work):
    check = compile_(spmdc, 'check', work, 'N=8')
    ck = os.path.join(work, 'ckpt')
    os.mkdir(ck)
    for name, blob, pattern in NPY_CASES:
        with open(os.path.join(ck, 'w.npy'), 'wb') as f:
            f.write(blob)
        rc, out = run(mpirun(2, check), work)
        print('-- %s' % name)
        expect_error(rc, out, 2, r"load 'ckpt/w\.npy': " + pattern)
    # and a good file loads
    with open(os.path.join(ck, 'w.npy'), 'wb') as f:
        f.write(npy())
    rc, out = run(mpirun(2, check), work)
    if rc != 0 or not re.search(r'sum 28\b', out):
        raise Fail('a good file does not load:\n' + out)
    print('ok: the good file loads: ' + out.strip().splitlines()[-1])


MESH_CASES = [
    (2, ['--mesh', 'dp=0'], r"--mesh 'dp=0'"),
    (2, ['--mesh', 'dp=two'], r"--mesh 'dp=two'"),
    (2, ['--mesh', 'dp='], r"--mesh 'dp='"),
    (2, ['--mesh', 'dp=-2'], r"--mesh 'dp=-2'"),
    (2, ['--mesh', 'dp=99999999999999999999'], r"axis 'dp' is larger than the world size 2"),
    (2, ['--mesh', 'dp=4294967298'], r"axis 'dp' is larger than the world size 2"),
    (2, ['--mesh', 'dp=3'], r"axis 'dp' is larger than the world size 2"),
    (4, ['--mesh', 'dp=3'], r"mesh \(dp=3\) has 3 ranks but the program runs on 4"),
    (2, ['--mesh', 'tp=2'], r"--mesh 'tp=2': no mesh axis named 'tp'"),
    (2, ['--mesh', 'dp=2,dp=2'], r"--mesh 'dp=2,dp=2': axis 'dp' is given twice"),
    (2, ['--mesh', 'dp'], r"--mesh 'dp': expected axis=size entries"),
    (2, ['--mesh'], r"option --mesh needs a value"),
]


def t_mesh(spmdc, work):
    train = compile_(spmdc, 'train', work, 'SAVE=0', 'STEPS=1', 'N=8')
    for np_, args, pattern in MESH_CASES:
        rc, out = run(mpirun(np_, train, *args), work)
        print('-- %s' % ' '.join(args))
        expect_error(rc, out, None, '.*' + pattern)


TESTS = {'kill_rank': t_kill_rank, 'ckpt_killed': t_ckpt_killed, 'ckpt_notdir': t_ckpt_notdir,
         'ckpt_readonly': t_ckpt_readonly, 'ckpt_full': t_ckpt_full, 'npy': t_npy, 'mesh': t_mesh}


def main():
    spmdc, which = sys.argv[1], sys.argv[2]
    work = tempfile.mkdtemp(prefix='faults-')
    try:
        TESTS[which](spmdc, work)
    except Skip as e:
        print('SKIPPED: %s' % e)
        return SKIP
    except Fail as e:
        print('FAIL: %s' % e)
        return 1
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == '__main__':
    sys.exit(main())
