"""spmdc: a checked SPMD program's export fns, called from Python.

    import spmdc
    lib = spmdc.load("./libmlp_step.so", mesh="dp=2,tp=1")
    loss, p, buf = lib.step(x, t, p, buf)      # NumPy arrays or lib's tensors

`spmdc --shared FILE.spmd -o libNAME.so` builds the library; this module
reads the library's own description of its export fns (spmd_host_describe,
over the generated spmd_exports[]) through ctypes.  Every rank passes its
local block of each argument (`lib.shard` cuts it from the global array)
and gets its local block of each result, as a `Tensor` that stays in the
runtime (on the GPU with --target=cuda) until `.numpy()` copies it out, so a
training step's parameters and moments go from one call to the next
without passing through Python.  Under `mpirun python3` the library runs on
mpi4py's MPI_COMM_WORLD; on one process without a launcher, on its own
one-rank MPI.  See docs/python.md.
"""
import atexit
import ctypes
import json
import os
import sys

import numpy as np

__all__ = ["load", "Library", "Function", "Tensor", "Error"]

_ERR = 1024
_DTYPES = {"f32": np.dtype(np.float32), "f64": np.dtype(np.float64), "i32": np.dtype(np.int32)}
_RT_DTYPE = {"f32": 0, "f64": 1, "i32": 2, "bf16": 3}
_DTYPE_NAME = {v: k for k, v in _RT_DTYPE.items()}
_NP_NAME = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64", np.dtype(np.int32): "i32",
            np.dtype(np.float16): "f16", np.dtype(np.int64): "i64", np.dtype(np.bool_): "bool"}


class Error(Exception):
    """An error every rank raises alike: a bad argument (its message names
    the rank that saw it), or the runtime's message of a check every rank
    failed (a bad mesh, a missing file)."""


def _launched():
    """Started by an MPI launcher (mpirun, srun)?"""
    return any(v in os.environ for v in ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "MPI_LOCALNRANKS"))


def _start_mpi():
    """Under a launcher, mpi4py initialises MPI (and finalises it at exit,
    after the library has closed); without one nothing is imported and the
    library starts a one-rank MPI of its own."""
    if "mpi4py.MPI" in sys.modules:
        return sys.modules["mpi4py.MPI"]
    if _launched():
        try:
            from mpi4py import MPI
            return MPI
        except ImportError:
            return None
    return None


def _type_text(dtype, shape, dim_axes=None, names=None):
    dims = []
    for d, n in enumerate(shape):
        ax = dim_axes[d] if dim_axes else []
        if not ax:
            dims.append(str(n))
        elif len(ax) == 1:
            dims.append("%d@%s" % (n, names[ax[0]]))
        else:
            dims.append("%d@(%s)" % (n, ", ".join(names[a] for a in ax)))
    return "%s[%s]" % (dtype, ", ".join(dims)) if dims else dtype


class Tensor:
    """This rank's block of a value, held by the runtime (`.numpy()` copies
    it out).  Returned by calls and passed to later calls without a copy."""

    __slots__ = ("_lib", "_ptr", "dtype", "shape", "spec")

    def __init__(self, lib, ptr, spec):
        self._lib, self._ptr, self.spec = lib, ptr, spec
        shape = (ctypes.c_int64 * 8)()
        nd = lib._c.spmd_host_tensor_shape(ptr, shape)
        self.shape = tuple(shape[i] for i in range(nd))
        self.dtype = _DTYPE_NAME[lib._c.spmd_host_tensor_dtype(ptr)]

    def numpy(self):
        """A copy of this rank's block as a NumPy array."""
        if self.dtype not in _DTYPES:
            raise Error("a %s tensor has no NumPy dtype" % self.dtype)
        out = np.empty(self.shape, dtype=_DTYPES[self.dtype])
        self._lib._check_open()
        self._lib._c.spmd_host_read(self._ptr, out.ctypes.data_as(ctypes.c_void_p))
        return out

    def item(self):
        return self.numpy().item()

    def __float__(self):
        return float(self.item())

    def __repr__(self):
        return "spmdc.Tensor(%s, rank %d's block of %s)" % (
            _type_text(self.dtype, self.shape), self._lib.rank,
            self.spec["type"] if self.spec else "?")

    def __del__(self):
        lib = self._lib
        if lib is not None and not lib._closed and self._ptr:
            lib._c.spmd_host_free(self._ptr)
            self._ptr = None


def _tree(leaves, paths):
    """Rebuilds a result from its leaves' paths: "" a tensor, "0", "1.w1" a
    tuple of tensors and dicts, "w1" a dict (a record)."""
    if len(paths) == 1 and paths[0] == "":
        return leaves[0]
    root = {}
    for leaf, path in zip(leaves, paths):
        node = root
        parts = path.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node[parts[-1]] = leaf

    def fix(node):
        if not isinstance(node, dict):
            return node
        node = {k: fix(v) for k, v in node.items()}
        if node and all(k.isdigit() for k in node):
            return tuple(node[str(i)] for i in range(len(node)))
        return node
    return fix(root)


class Function:
    """An export fn: call it with its parameters (a record parameter as a
    dict of its fields, nested as the struct), positionally or by name."""

    def __init__(self, lib, index, desc):
        self._lib, self._index, self.name = lib, index, desc["name"]
        self.args, self.results, self.has_vjp = desc["args"], desc["results"], desc["vjp"]
        names = lib.mesh_names
        for a in self.args + self.results:
            a["type"] = _type_text(a["dtype"], a["shape"], a["dim_axes"], names)
        self.params = []
        for a in self.args:
            top = a["path"].split(".")[0]
            if top not in self.params:
                self.params.append(top)
        self._blocks = None

    def __repr__(self):
        return "spmdc.Function %s(%s)" % (self.name, ", ".join(
            "%s: %s" % (a["path"], a["type"]) for a in self.args))

    def blocks(self, results=False):
        """This rank's (offset, local shape) of each argument (or result)."""
        lib = self._lib
        specs = self.results if results else self.args
        out = []
        for i, a in enumerate(specs):
            off, loc = (ctypes.c_int64 * 8)(), (ctypes.c_int64 * 8)()
            err = ctypes.create_string_buffer(_ERR)
            if lib._c.spmd_host_layout(self._index, int(results), i, off, loc, err, _ERR):
                raise Error(err.value.decode())
            nd = len(a["shape"])
            out.append((tuple(off[d] for d in range(nd)), tuple(loc[d] for d in range(nd))))
        return out

    def _leaves(self, args, kwargs):
        if len(args) > len(self.params):
            raise Error("'%s' takes %d arguments (%s), got %d" % (
                self.name, len(self.params), ", ".join(self.params), len(args)))
        given = dict(zip(self.params, args))
        for k, v in kwargs.items():
            if k not in self.params:
                raise Error("'%s' has no parameter '%s' (it has %s)" % (self.name, k, ", ".join(self.params)))
            if k in given:
                raise Error("argument '%s' of '%s' is given twice" % (k, self.name))
            given[k] = v
        leaves = []
        for a in self.args:
            parts = a["path"].split(".")
            if parts[0] not in given:
                raise Error("argument '%s' of '%s' is missing" % (parts[0], self.name))
            v = given[parts[0]]
            for p in parts[1:]:
                if isinstance(v, dict) and p in v:
                    v = v[p]
                elif hasattr(v, p) and not isinstance(v, (np.ndarray, Tensor)):
                    v = getattr(v, p)
                else:
                    raise Error("argument '%s' of '%s' has no field '%s' (a record: give a dict of its fields)"
                                % (parts[0], self.name, ".".join(parts[1:])))
            leaves.append(v)
        return leaves

    def _check(self, a, block, v):
        """None, or the message of what is wrong with v for parameter a."""
        want = _type_text(a["dtype"], block)
        expected = "argument '%s' of '%s': expected %s" % (a["path"], self.name, a["type"])
        if a["type"] != want:
            expected += " (rank %d's block: %s)" % (self._lib.rank, want)
        if isinstance(v, Tensor):
            if v._lib is not self._lib:
                return expected + ", got a tensor of another library"
            got = _type_text(v.dtype, v.shape)
        elif isinstance(v, np.ndarray):
            name = _NP_NAME.get(v.dtype, str(v.dtype))
            got = _type_text(name, v.shape)
            if got == want and not v.flags.c_contiguous:
                return expected + ", got a non-contiguous array (np.ascontiguousarray makes one)"
        else:
            return expected + ", got %s (pass a NumPy array)" % type(v).__name__
        if got != want:
            return expected + ", got " + got
        return None

    def _prepare(self, args, kwargs):
        lib = self._lib
        lib._check_open()
        msg = None
        try:
            leaves = self._leaves(args, kwargs)
        except Error as e:
            leaves, msg = None, str(e)
        if self._blocks is None and msg is None:
            self._blocks = [loc for _, loc in self.blocks()]
        if msg is None:
            for a, block, v in zip(self.args, self._blocks, leaves):
                msg = self._check(a, block, v)
                if msg:
                    break
        # every rank raises when any rank's arguments are wrong
        out = ctypes.create_string_buffer(_ERR)
        if lib._c.spmd_host_agree(1 if msg else 0, (msg or "").encode()[:_ERR - 1], out, _ERR):
            raise Error(out.value.decode())
        ptrs, temps = (ctypes.c_void_p * max(1, len(leaves)))(), []
        for i, (a, v) in enumerate(zip(self.args, leaves)):
            if isinstance(v, Tensor):
                ptrs[i] = v._ptr
            else:
                shape = (ctypes.c_int64 * 8)(*v.shape)
                p = lib._c.spmd_host_tensor(_RT_DTYPE[a["dtype"]], v.ndim, shape,
                                            v.ctypes.data_as(ctypes.c_void_p))
                temps.append(p)
                ptrs[i] = p
        return ptrs, temps

    def __call__(self, *args, **kwargs):
        """Runs the export fn; its results as Tensors (a tuple or record
        result as a tuple of tensors and dicts)."""
        lib = self._lib
        ptrs, temps = self._prepare(args, kwargs)
        outs = (ctypes.c_void_p * max(1, len(self.results)))()
        err = ctypes.create_string_buffer(_ERR)
        rc = lib._c.spmd_host_call(self._index, ptrs, outs, err, _ERR)
        for p in temps:
            lib._c.spmd_host_free(p)
        if rc:
            raise Error(err.value.decode())
        leaves = [Tensor(lib, outs[r], a) for r, a in enumerate(self.results)]
        return _tree(leaves, [a["path"] for a in self.results])

    def vjp(self, *args, dout=1.0, **kwargs):
        """The gradient of each float parameter (a scalar result's, seeded
        with dout), as a dict path -> Tensor."""
        lib = self._lib
        if not self.has_vjp:
            raise Error("export fn '%s' has no vjp (its result is a tuple or a record)" % self.name)
        ptrs, temps = self._prepare(args, kwargs)
        res = self.results[0]
        if res["shape"]:
            raise Error("vjp from Python takes a scalar result")
        d = np.array(dout, dtype=_DTYPES[res["dtype"]])
        dp = lib._c.spmd_host_tensor(_RT_DTYPE[res["dtype"]], 0, (ctypes.c_int64 * 8)(),
                                     d.ctypes.data_as(ctypes.c_void_p))
        grads = (ctypes.c_void_p * max(1, len(self.args)))()
        err = ctypes.create_string_buffer(_ERR)
        rc = lib._c.spmd_host_vjp(self._index, ptrs, dp, grads, err, _ERR)
        for p in temps + [dp]:
            lib._c.spmd_host_free(p)
        if rc:
            raise Error(err.value.decode())
        return {a["path"]: Tensor(lib, grads[i], a) for i, a in enumerate(self.args) if grads[i]}


class Library:
    """A library `spmdc --shared` built, opened on a mesh (given once)."""

    def __init__(self, path, mesh=None):
        self._closed = True
        self.mpi = _start_mpi()
        self._c = c = ctypes.CDLL(os.path.abspath(path))
        vp, i64p, cp, sz = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_char_p, ctypes.c_size_t
        for name, res, argt in [
                ("spmd_host_describe", cp, []),
                ("spmd_host_open", ctypes.c_int, [cp, cp, sz]),
                ("spmd_host_close", ctypes.c_int, []),
                ("spmd_host_rank", ctypes.c_int, []),
                ("spmd_host_world", ctypes.c_int, []),
                ("spmd_host_mesh", None, [ctypes.POINTER(ctypes.c_int)]),
                ("spmd_host_layout", ctypes.c_int, [ctypes.c_int, ctypes.c_int, ctypes.c_int, i64p, i64p, cp, sz]),
                ("spmd_host_agree", ctypes.c_int, [ctypes.c_int, cp, cp, sz]),
                ("spmd_host_tensor", vp, [ctypes.c_int, ctypes.c_int, i64p, vp]),
                ("spmd_host_tensor_shape", ctypes.c_int, [vp, i64p]),
                ("spmd_host_tensor_dtype", ctypes.c_int, [vp]),
                ("spmd_host_read", None, [vp, vp]),
                ("spmd_host_free", None, [vp]),
                ("spmd_host_call", ctypes.c_int, [ctypes.c_int, ctypes.POINTER(vp), ctypes.POINTER(vp), cp, sz]),
                ("spmd_host_vjp", ctypes.c_int,
                 [ctypes.c_int, ctypes.POINTER(vp), vp, ctypes.POINTER(vp), cp, sz])]:
            fn = getattr(c, name)
            fn.restype, fn.argtypes = res, argt
        self.description = json.loads(c.spmd_host_describe().decode())
        self.target = self.description["target"]
        self.mesh_names = self.description["mesh"]["names"]
        if isinstance(mesh, dict):
            mesh = ",".join("%s=%d" % kv for kv in mesh.items())
        err = ctypes.create_string_buffer(_ERR)
        if c.spmd_host_open((mesh or "").encode(), err, _ERR):
            raise Error(err.value.decode())
        self._closed = False
        atexit.register(self.close)
        self.rank, self.world = c.spmd_host_rank(), c.spmd_host_world()
        sizes = (ctypes.c_int * max(1, len(self.mesh_names)))()
        c.spmd_host_mesh(sizes)
        self.mesh = {n: sizes[i] for i, n in enumerate(self.mesh_names)}
        self.functions = {}
        for i, f in enumerate(self.description["functions"]):
            self.functions[f["name"]] = Function(self, i, f)

    def __getattr__(self, name):
        fns = self.__dict__.get("functions", {})
        if name in fns:
            return fns[name]
        raise AttributeError("the library has no export fn '%s' (it has %s)" % (name, ", ".join(fns) or "none"))

    def _check_open(self):
        if self._closed:
            raise Error("the library is closed")

    def shard(self, fn, param, array):
        """This rank's block of a global array for parameter `param` (its
        path: "x", "p.w1") of export fn `fn`."""
        f = self.functions[fn] if isinstance(fn, str) else fn
        for a, (off, loc) in zip(f.args, f.blocks()):
            if a["path"] == param:
                array = np.asarray(array)
                if tuple(array.shape) != tuple(a["shape"]):
                    raise Error("shard: '%s' of '%s' is %s, got an array of shape %s"
                                % (param, f.name, a["type"], tuple(array.shape)))
                sl = tuple(slice(o, o + n) for o, n in zip(off, loc))
                return np.ascontiguousarray(array[sl], dtype=_DTYPES[a["dtype"]])
        raise Error("'%s' has no parameter '%s'" % (f.name, param))

    def close(self):
        """Frees the runtime (and finalises MPI if the library started it);
        the library's tensors are dead afterwards."""
        if not self._closed:
            self._closed = True
            self._c.spmd_host_close()


def load(path, mesh=None):
    """Opens the library at path on mesh ("dp=2,tp=1" or {"dp": 2}; axes not
    given keep their declared size, and one may be left to the world size)."""
    return Library(path, mesh)
