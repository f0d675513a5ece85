"""gen.py: random well-typed global-SPMD programs on a 2-axis mesh, and their
mutants (tests/soundness/README in tests/README.md).

A program is a list of `let` statements in A-normal form (each applies one
op to earlier names) over export fn parameters with random partition specs.
The generator carries its own model of the typing rules (SPEC sections 5-7,
docs/global_rules.md): every op's result type is computed by `type_of`, which
raises Reject for an ill-typed application.  Programs are built only from
applications the model accepts, inserting the collectives an op needs to
line its operands up.  A mutant is a program with one collective removed, a
src/dst swapped, an out_partial_axes dropped or a shard dim changed; only
mutants the model rejects are produced, so spmdc must reject every one.

Only semantics-preserving collectives and casts are used (all_reduce,
all_gather, reduce_scatter, all_to_all, convert/reinterpret I->R, convert to
S(i) and to P, expert R->I and S(i)->P, redistribute), so every program must
compute the same loss and gradients on every mesh.  They carry the options
(issue 28): axis tuples ((dp, tp) or (tp, dp) where both axes make the same
move), op=sum on P, dtype=/bwd_dtype= of the program's own dtype, and
op=avg|max|min over copies of an I value claimed different
(reinterpret(I -> V, expert=true), whose mean, max and min are the value;
max and min of a constant, as they have no gradient), and reduce_scatter
op=avg of such copies.  The fused ops are generated too: attention(q, k, v)
with the batch or the heads sharded alike (causal or not, grouped-query
heads where the heads are whole), and cross_entropy with the class dim
whole or sharded (the vocabulary-parallel loss), reduction "none" or "sum"
(a pending sum over sharded rows), against targets argmax(randn(...))
laid out as the rows; attention's kv_len= (a cache's first keys) and
scale_fields on a record (some fields times a number).  Mutants also
change op=sum on a P value to avg, max or min (reduce_scatter's to avg), make a
scale_fields glob name no field, add a dtype=f32 without
bwd_dtype= to a collective whose backward sums, and drop an expert=true.
"""
import random

AXES = ('dp', 'tp')
SIZES = (4, 8)           # every dim divides by dp*tp on meshes up to 2x2
MAX_NUMEL = 128


class Reject(Exception):
    """The model's typing rules reject an op application."""


class SizeReject(Reject):
    """Not a typing rule: sizes the generator avoids (a sharded dim must
    divide on every mesh it runs on, tensors stay small).  spmdc checks
    divisibility at run time, so a mutant rejected only for this is not
    produced."""


class Ty:
    """A global tensor type: shape, per-dim sharding axes (major to minor),
    and the letter R, I or P of every axis that shards no dim."""

    def __init__(self, shape, spec, lt):
        self.shape = tuple(shape)
        self.spec = tuple(tuple(s) for s in spec)
        self.lt = {a: l for a, l in lt.items() if not any(a in s for s in self.spec)}
        assert len(self.spec) == len(self.shape)
        for a in AXES:
            assert a in self.lt or any(a in s for s in self.spec), (a, self.spec, lt)

    def letter(self, a):
        return 'S' if self.sdim(a) is not None else self.lt[a]

    def sdim(self, a):
        for d, s in enumerate(self.spec):
            if a in s:
                return d
        return None

    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    def key(self):
        return (self.shape, self.spec, tuple(sorted(self.lt.items())))

    def __eq__(self, o):
        return isinstance(o, Ty) and self.key() == o.key()

    def __hash__(self):
        return hash(self.key())

    def text(self):
        dims = []
        for n, s in zip(self.shape, self.spec):
            if not s:
                dims.append(str(n))
            elif len(s) == 1:
                dims.append('%d@%s' % (n, s[0]))
            else:
                dims.append('%d@(%s)' % (n, ', '.join(s)))
        t = 'f64'
        if dims:
            t += '[' + ', '.join(dims) + ']'
        rest = [a for a in AXES if a in self.lt]
        if rest:
            t += '{' + ', '.join('%s: %s' % (a, self.lt[a]) for a in rest) + '}'
        return t

    __repr__ = text

    def decl_text(self):
        """The shape and partition spec only: a struct field's declared type,
        which constrains only the axes its spec names."""
        return Ty(self.shape, self.spec, {a: 'R' for a in AXES}).text().split('{')[0]


class Rec:
    """A record value (SPEC section 13): its struct and its fields' types."""

    def __init__(self, struct, fields):
        self.struct, self.fields = struct, tuple(fields)

    def __eq__(self, o):
        return isinstance(o, Rec) and (self.struct, self.fields) == (o.struct, o.fields)

    def __hash__(self):
        return hash((self.struct, self.fields))

    def numel(self):
        return max(t.numel() for _, t in self.fields)

    def text(self):
        return '%s(%s)' % (self.struct, ', '.join('%s: %s' % (f, t.text()) for f, t in self.fields))

    __repr__ = text


# ---------------------------------------------------------------- local rules

def combine(cls, letters):
    """Per-axis rule of SPEC section 5 for operand letters (None: a literal)."""
    ls = [l for l in letters if l is not None]
    if not ls:
        raise Reject('no tensor operand')
    if 'V' in ls:   # the model keeps V (copies claimed different) to the reductions made for it
        raise Reject('V operand')
    if 'I' in ls:
        if any(l != 'I' for l in ls):
            raise Reject('I mixed')
        return 'I'
    if 'P' in ls:
        if 'S' in ls:
            raise Reject('P with V')
        if cls == 'nonlinear':
            raise Reject('P in a nonlinear op')
        if cls == 'linear':
            if any(l != 'P' for l in letters):   # a literal next to P too
                raise Reject('P with R in a linear op')
            return 'P'
        if cls == 'multilinear':
            if ls.count('P') != 1:
                raise Reject('two P factors')
            return 'P'
    if 'S' in ls:
        return 'S'
    return 'R'


UNARY = ('tanh', 'sin', 'cos', 'square', 'sigmoid', 'silu', 'gelu')


def type_elementwise(cls, ts, nlit=0):
    t0 = ts[0]
    for t in ts[1:]:
        if t.shape != t0.shape:
            raise Reject('shapes differ')
        if t.spec != t0.spec:
            raise Reject('layouts differ')
    lt = {}
    for a in AXES:
        letters = [t.letter(a) for t in ts] + [None] * nlit
        r = combine(cls, letters)
        if r != 'S':
            lt[a] = r
    return Ty(t0.shape, t0.spec, lt)


def type_einsum(eq, a, b, out_partial):
    ins, out = eq.split('->')
    la, lb = ins.split(',')
    if len(la) != len(a.shape) or len(lb) != len(b.shape):
        raise Reject('rank')
    size, lspec = {}, {}
    for labels, t in ((la, a), (lb, b)):
        for c, n, s in zip(labels, t.shape, t.spec):
            if size.setdefault(c, n) != n:
                raise Reject('label size')
            if lspec.setdefault(c, s) != s:
                raise Reject('label layout')
    contracted = [c for c in size if c not in out]
    partial = []
    lt = {}
    for x in AXES:
        lab = [c for c in size if x in lspec[c]]
        if len(lab) > 1:
            raise Reject('axis shards two labels')
        if lab:
            c = lab[0]
            for labels, t in ((la, a), (lb, b)):
                if c not in labels and t.letter(x) != 'R':
                    raise Reject('operand without the label varies')
            if c in contracted:
                partial.append(x)
                lt[x] = 'P'
        else:
            r = combine('multilinear', [a.letter(x), b.letter(x)])
            lt[x] = r
    if set(partial) != set(out_partial):
        raise Reject('out_partial_axes %s, contracted axes %s' % (out_partial, partial))
    return Ty([size[c] for c in out], [lspec[c] for c in out], lt)


def type_sum(t, dim, out_partial):
    dims = range(len(t.shape)) if dim is None else [dim]
    axes = [x for d in dims for x in t.spec[d]]
    if set(axes) != set(out_partial):
        raise Reject('sum out_partial_axes')
    for x in out_partial:
        if t.letter(x) != 'S':
            raise Reject('out_partial on an unsharded axis')
    lt = {}
    for x in AXES:
        lt[x] = 'P' if x in axes else (t.lt.get(x))
    keep = [d for d in range(len(t.shape)) if d not in dims]
    return Ty([t.shape[d] for d in keep], [t.spec[d] for d in keep], {x: l for x, l in lt.items() if l})


def type_reshape(t, shape):
    if prod(shape) != t.numel():
        raise Reject('reshape size')
    spec = [()] * len(shape)
    starts_new = {}
    off = 1
    for e, n in enumerate(shape):
        starts_new.setdefault(off, e)
        off *= n
    off = 1
    for d, n in enumerate(t.shape):
        if t.spec[d]:
            e = starts_new.get(off)
            # the first new dim of size > 1 starting there takes the spec
            if e is None:
                raise Reject('reshape moves a sharded dim')
            while e < len(shape) and shape[e] == 1:
                e += 1
            if e >= len(shape) or shape[e] % 4:
                raise SizeReject('reshape: sharded dim too small')
            spec[e] = t.spec[d]
        off *= n
    return Ty(shape, spec, t.lt)


def type_attention(q, k, v):
    """attention(q [B, H, T, E], k [B, Hkv, S, E], v [B, Hkv, S, Ev]): B and
    the heads sharded alike in q, k and v, T, S and E whole; per axis a
    nonlinear op (SPEC 16, check_attention.c).  Grouped-query heads (Hkv <
    H) only with the heads whole: sharded, their groups must line up with
    the blocks, which the generator's sizes do not promise."""
    for t in (q, k, v):
        if len(t.shape) != 4:
            raise Reject('attention takes 4-d q, k, v')
    if q.shape[0] != k.shape[0] or k.shape[0] != v.shape[0] or k.shape[1] != v.shape[1] or \
            k.shape[2] != v.shape[2] or q.shape[3] != k.shape[3] or q.shape[1] % k.shape[1]:
        raise Reject('attention sizes')
    for t in (q, k, v):
        if t.spec[2] or t.spec[3]:
            raise Reject('attention: a sharded sequence or head size')
    for t in (k, v):
        if t.spec[0] != q.spec[0] or t.spec[1] != q.spec[1]:
            raise Reject('attention: batch or heads laid out differently')
    if q.spec[1] and q.shape[1] != k.shape[1]:
        raise SizeReject('grouped heads sharded')
    lt = {}
    for x in AXES:
        r = combine('nonlinear', [q.letter(x), k.letter(x), v.letter(x)])
        if r != 'S':
            lt[x] = r
    return Ty(q.shape[:3] + (v.shape[3],), q.spec, lt)


def type_xent(x, T, reduction, out_partial):
    """cross_entropy(x [N, C], targets, reduction=) with the targets
    argmax(randn(T), dim=1): C may be sharded (the vocabulary-parallel loss,
    R on its axes; the targets R there), the rows line up with the targets';
    per other axis a nonlinear op; "sum" over sharded rows is a pending sum
    (out_partial_axes), as sum's."""
    if len(x.shape) != 2 or T.shape != x.shape or T.spec[1]:
        raise Reject('cross_entropy shapes')
    if T.spec[0] != x.spec[0]:
        raise Reject('cross_entropy: targets laid out differently')
    classes = x.spec[1]
    lt = {}
    for a in AXES:
        if a in classes:
            if T.letter(a) != 'R':
                raise Reject('cross_entropy: targets not R on a class axis')
            lt[a] = 'R'
            continue
        r = combine('nonlinear', [x.letter(a), T.letter(a)])
        if r != 'S':
            lt[a] = r
    rows = tuple(a for a in x.spec[0])
    if reduction == 'none':
        if out_partial:
            raise Reject('out_partial_axes with reduction="none"')
        return Ty(x.shape[:1], x.spec[:1], lt)
    if set(out_partial) != set(rows):
        raise Reject('cross_entropy sum: out_partial_axes %s, rows on %s' % (out_partial, rows))
    for a in rows:
        lt[a] = 'P'
    return Ty((), (), lt)


def prod(xs):
    n = 1
    for x in xs:
        n *= x
    return n


def tup(axes):
    return axes[0] if len(axes) == 1 else '(%s)' % ', '.join(axes)


def letter_text(l):
    return l


def type_collective(st, t):
    """Result type of a collective or cast statement `st` on a value of type t."""
    op, axes = st.op, st.attrs.get('axes')
    src, dst = st.attrs.get('src'), st.attrs.get('dst')
    if isinstance(t, Rec):  # a collective on a record applies to every field
        return Rec(t.struct, [(f, type_collective(st, ft)) for f, ft in t.fields])
    if op == 'redistribute' and 'T' in st.attrs:
        T = st.attrs['T']
        if T.shape != t.shape:
            raise Reject('redistribute shape')
        if any(t.letter(x) == 'V' for x in AXES):
            raise Reject('redistribute of V without a layout')
        return T

    def sdim(l):
        return int(l[2:-1]) if l.startswith('S(') else None
    si, di = sdim(src), sdim(dst)
    spec = [list(s) for s in t.spec]
    lt = dict(t.lt)
    # the source must be what the value is on every axis
    if si is not None:
        if si >= len(spec) or tuple(spec[si][-len(axes):]) != tuple(axes):
            raise Reject('src S(i) is not the minor-most sharding of dim i')
        del spec[si][-len(axes):]
    else:
        for x in axes:
            if t.letter(x) != src:
                raise Reject('src %s but the value is %s on %s' % (src, t.letter(x), x))
    allowed = {
        'all_reduce': [('P', 'R'), ('P', 'I'), ('V', 'R'), ('V', 'I')],
        'all_gather': [('S', 'R'), ('S', 'I')],
        'reduce_scatter': [('P', 'S'), ('V', 'S')],
        'all_to_all': [('S', 'S')],
        'convert': [('I', 'R'), ('R', 'S'), ('I', 'S'), ('R', 'P'), ('I', 'P'), ('R', 'I'), ('S', 'P')],
        'reinterpret': [('I', 'R'), ('I', 'V')],
        # redistribute(x, axes, src=, dst=): any change, semantics-preserving
        'redistribute': [(a, b) for a in 'RIPS' for b in 'RIPS' if a != b or a == 'S'],
    }[op]
    s0 = 'S' if si is not None else src
    d0 = 'S' if di is not None else dst
    if (s0, d0) not in allowed:
        raise Reject('%s cannot go %s -> %s' % (op, src, dst))
    if op == 'redistribute' and si is not None and si == di:
        raise Reject('redistribute S(i) -> S(i)')
    expert = (op == 'convert' and (s0, d0) in (('I', 'P'), ('R', 'I'), ('S', 'P'))) or \
        (op == 'reinterpret' and (s0, d0) == ('I', 'V'))   # in global code (issue 28)
    if expert != bool(st.attrs.get('expert')):
        raise Reject('expert flag')
    rop = st.attrs.get('rop')
    if rop is not None and op not in ('all_reduce', 'reduce_scatter'):
        raise Reject('op= on %s' % op)
    if op == 'reduce_scatter' and rop not in (None, 'sum', 'avg'):
        raise Reject('reduce_scatter op=%s' % rop)
    if s0 == 'P' and rop not in (None, 'sum'):
        raise Reject("op=%s reads a P value's parts" % rop)
    if s0 == 'V' and rop not in ('avg', 'max', 'min'):
        raise Reject('op=sum of copies claimed different counts them once per rank')
    wire, bwd = st.attrs.get('dtype'), st.attrs.get('bwd_dtype')
    sums_back = (op, s0, d0) in (('all_gather', 'S', 'R'), ('all_reduce', 'P', 'R'), ('convert', 'I', 'R'),
                                 ('reinterpret', 'I', 'R'), ('reinterpret', 'I', 'V'))
    if wire == 'f32' and bwd is None and sums_back:
        raise Reject('dtype= casts down and the backward sums: bwd_dtype= is needed')
    if di is not None:
        if di >= len(spec) or (si is not None and di == si):
            raise Reject('dst dim')
        if t.shape[di] % 4:
            raise SizeReject('dst dim too small')
        spec[di] += list(axes)
        for x in axes:
            lt.pop(x, None)
    else:
        for x in axes:
            lt[x] = dst
    return Ty(t.shape, spec, lt)


COLLECTIVES = ('all_reduce', 'all_gather', 'reduce_scatter', 'all_to_all', 'convert', 'reinterpret',
               'redistribute')


class St:
    """`let name = op(args..., attrs)`."""

    def __init__(self, name, op, args, **attrs):
        self.name, self.op, self.args, self.attrs = name, op, list(args), attrs

    def copy(self):
        return St(self.name, self.op, list(self.args), **dict(self.attrs))

    def is_collective(self):
        return self.op in COLLECTIVES

    def text(self):
        a, at = self.args, self.attrs
        op = self.op
        if op == 'alias':
            e = a[0]
        elif op in UNARY:
            e = '%s(%s)' % (op, a[0])
        elif op == 'scale':
            e = '%s * %s' % (a[0], at['c'])
        elif op == 'neg':
            e = '-%s' % a[0]
        elif op in ('+', '-', '*'):
            e = '%s %s %s' % (a[0], op, a[1])
        elif op == 'matmul':
            e = 'matmul(%s, %s%s)' % (a[0], a[1], opa(at))
        elif op == 'einsum':
            e = 'einsum("%s", %s, %s%s)' % (at['eq'], a[0], a[1], opa(at))
        elif op == 'sum':
            dim = '' if at['dim'] is None else ', dim=%d' % at['dim']
            e = 'sum(%s%s%s)' % (a[0], dim, opa(at))
        elif op == 'mean':
            e = 'mean(%s, dim=%d)' % (a[0], at['dim'])
        elif op in ('softmax', 'log_softmax'):
            e = '%s(%s, dim=%d)' % (op, a[0], at['dim'])
        elif op == 'transpose':
            e = 'transpose(%s, %d, %d)' % (a[0], at['d0'], at['d1'])
        elif op == 'permute':
            e = 'permute(%s, [%s])' % (a[0], ', '.join(map(str, at['perm'])))
        elif op == 'reshape':
            e = 'reshape(%s, [%s])' % (a[0], ', '.join(map(str, at['shape'])))
        elif op == 'redistribute' and 'T' in at:
            e = 'redistribute(%s, %s%s)' % (a[0], at['T'].text(), options(at))
        elif op == 'record':
            e = '%s(%s)' % (at['struct'], ', '.join('%s=%s' % fa for fa in zip(at['fields'], a)))
        elif op == 'scale_fields':
            e = 'scale_fields(%s, %s, %s="%s")' % (a[0], at['c'], at['sel'], at['globs'])
        elif op == 'field':
            e = '%s.%s' % (a[0], at['field'])
        elif op == 'randn':
            e = 'randn(%s, seed=%d, std=1.0)' % (at['T'].text(), at['seed'])
        elif op == 'attention':
            e = 'attention(%s, %s, %s, causal=%s%s%s)' % (a[0], a[1], a[2], 'true' if at['causal'] else 'false',
                                                         ', scale=%s' % at['scale'] if at.get('scale') else '',
                                                         ', kv_len=%d' % at['kv_len'] if at.get('kv_len') else '')
        elif op == 'xent':
            # the targets: global class ids drawn from a constant, laid out
            # as the logits' rows (argmax over the whole class dim)
            red = at['reduction']
            e = 'cross_entropy(%s, argmax(randn(%s, seed=%d, std=1.0), dim=1), reduction="%s"%s)' % (
                a[0], at['T'].text(), at['seed'], red, opa(at))
        else:
            e = '%s(%s, %s, src=%s, dst=%s%s%s)' % (op, a[0], tup(at['axes']), at['src'], at['dst'],
                                                   ', expert=true' if at.get('expert') else '', options(at))
        return 'let %s = %s;' % (self.name, e)


def options(at):
    """The options of a collective: op=, dtype=, bwd_dtype=."""
    out = ''
    for key, name in (('rop', 'op'), ('dtype', 'dtype'), ('bwd_dtype', 'bwd_dtype')):
        if at.get(key):
            out += ', %s=%s' % (name, at[key])
    return out


def opa(at):
    p = at.get('out_partial') or ()
    return ', out_partial_axes=%s' % tup(p) if p else ''


def type_st(st, env):
    ts = [env[a] for a in st.args]
    op, at = st.op, st.attrs
    if op == 'alias':
        return ts[0]
    if op == 'randn':
        return at['T']
    if op == 'record':
        return Rec(at['struct'], zip(at['fields'], ts))
    if op == 'scale_fields':
        # the selected fields times a number (multilinear with a literal:
        # every letter stays), the others as they are; a glob must match
        if not isinstance(ts[0], Rec):
            raise Reject('scale_fields of a tensor')
        names = [f for f, _ in ts[0].fields]
        if any(g not in names for g in at['globs'].split('|')):
            raise Reject('scale_fields: a glob matches no field')
        for _, ft in ts[0].fields:
            type_elementwise('multilinear', [ft], nlit=1)
        return ts[0]
    if op == 'field':
        if not isinstance(ts[0], Rec):
            raise Reject('field of a tensor')
        return dict(ts[0].fields)[at['field']]
    if any(isinstance(t, Rec) for t in ts) and not st.is_collective():
        raise Reject('%s of a record' % op)
    if op == 'attention':
        return type_attention(*ts)
    if op == 'xent':
        return type_xent(ts[0], at['T'], at['reduction'], at.get('out_partial') or ())
    if op in UNARY:
        return type_elementwise('nonlinear', ts)
    if op == 'scale':
        return type_elementwise('multilinear', ts, nlit=1)
    if op == 'neg':
        return type_elementwise('linear', ts)
    if op in ('+', '-'):
        return type_elementwise('linear', ts)
    if op == '*':
        return type_elementwise('multilinear', ts)
    if op in ('matmul', 'einsum'):
        eq = at['eq'] if op == 'einsum' else 'ij,jk->ik'
        return type_einsum(eq, ts[0], ts[1], at.get('out_partial') or ())
    if op == 'sum':
        return type_sum(ts[0], at['dim'], at.get('out_partial') or ())
    if op in ('mean', 'softmax', 'log_softmax'):
        t = ts[0]
        if t.spec[at['dim']]:
            raise Reject('%s over a sharded dim' % op)
        if op == 'mean':
            return type_sum(t, at['dim'], ())
        return type_elementwise('nonlinear', ts)
    if op == 'transpose':
        perm = list(range(len(ts[0].shape)))
        perm[at['d0']], perm[at['d1']] = perm[at['d1']], perm[at['d0']]
        return permute(ts[0], perm)
    if op == 'permute':
        return permute(ts[0], at['perm'])
    if op == 'reshape':
        return type_reshape(ts[0], at['shape'])
    if st.is_collective():
        return type_collective(st, ts[0])
    raise AssertionError(op)


def permute(t, perm):
    return Ty([t.shape[p] for p in perm], [t.spec[p] for p in perm], t.lt)


class Program:
    def __init__(self, name, params, body, loss_lt, structs=()):
        self.name = name
        self.params = params          # [(name, Ty)]
        self.body = body              # [St], without the loss
        self.loss_lt = loss_lt        # {axis: 'P' | 'I'}
        self.structs = list(structs)  # [(name, [(field, declared type text)])]

    def copy(self):
        return Program(self.name, list(self.params), [s.copy() for s in self.body], dict(self.loss_lt),
                       self.structs)

    def statements(self):
        """The body and the statements that reduce every leaf to the loss."""
        return self.body + loss_statements(self)

    def typecheck(self, sts=None):
        """The type of every name; Reject if the model rejects the program."""
        sts = self.statements() if sts is None else sts
        env = dict(self.params)
        for st in sts:
            for a in st.args:
                if a not in env:
                    raise Reject('unbound %s' % a)
            env[st.name] = type_st(st, env)
        if env[sts[-1].name] != self.ret_type():
            raise Reject('result %s, declared %s' % (env[sts[-1].name], self.ret_type()))
        return env

    def ret_type(self):
        return Ty((), (), self.loss_lt)

    def text(self, sts=None):
        sts = self.statements() if sts is None else sts
        ps = ', '.join('%s: %s' % (n, t.text()) for n, t in self.params)
        used = {st.attrs.get('struct') for st in sts}
        lines = ['struct %s { %s }' % (n, ', '.join('%s: %s' % fd for fd in fs))
                 for n, fs in self.structs if n in used]
        lines.append('export fn %s(%s) -> %s {' % (self.name, ps, self.ret_type().text()))
        lines += ['  ' + st.text() for st in sts]
        lines.append('  return %s;' % sts[-1].name)
        lines.append('}')
        return '\n'.join(lines) + '\n'


def leaves(p):
    used = set()
    for st in p.body:
        used.update(st.args)
    names = [n for n, _ in p.params] + [st.name for st in p.body]
    return [n for n in names if n not in used]


def loss_statements(p):
    """Reduce each leaf to a scalar with the loss's letters, then add them."""
    env = dict(p.params)
    for st in p.body:
        env[st.name] = type_st(st, env)
    out, parts = [], []
    for i, leaf in enumerate(leaves(p)):
        t, cur = env[leaf], leaf

        def emit(op, args, **attrs):
            nonlocal t, cur
            st = St('l%d_%d' % (i, len(out)), op, args, **attrs)
            env[st.name] = t = type_st(st, env)
            out.append(st)
            cur = st.name
        if all(t.letter(x) != 'P' for x in AXES):
            emit('square', [cur])
        # fixed random weights, so that a permutation of the elements (a
        # misplaced block) changes the loss
        val = cur
        emit('randn', [], T=Ty(t.shape, t.spec, {x: ('R' if l == 'P' else l) for x, l in t.lt.items()}),
             seed=1 + i)
        emit('*', [val, cur])
        sharded = [x for s in t.spec for x in s]
        emit('sum', [cur], dim=None, out_partial=tuple(sharded))
        for x in AXES:
            l, want = t.letter(x), p.loss_lt[x]
            if l == want:
                continue
            if l == 'P':
                emit('all_reduce', [cur], axes=(x,), src='P', dst='I')
            elif l == 'R' and want == 'P':
                emit('convert', [cur], axes=(x,), src='R', dst='P')
            elif l == 'R':
                emit('convert', [cur], axes=(x,), src='R', dst='I', expert=True)
            else:
                emit('convert', [cur], axes=(x,), src='I', dst='P', expert=True)
        parts.append(cur)
    total = parts[0]
    for j, q in enumerate(parts[1:]):
        st = St('loss%d' % j, '+', [total, q])
        env[st.name] = type_st(st, env)
        out.append(st)
        total = st.name
    if total != (out[-1].name if out else None):
        out.append(St('loss', 'alias', [total]))
    return out


# ---------------------------------------------------------------- generation

class Gen:
    def __init__(self, rng, name):
        self.r = rng
        self.name = name
        self.params = []
        self.body = []
        self.env = {}
        self.structs = []
        self.n = 0

    def fresh(self, prefix='v'):
        self.n += 1
        return '%s%d' % (prefix, self.n)

    def random_layout(self, shape, allow_p=False):
        r = self.r
        spec = [[] for _ in shape]
        lt = {}
        for x in AXES:
            c = r.random()
            dims = [d for d, n in enumerate(shape) if n % 4 == 0]
            if dims and c < 0.45:
                spec[r.choice(dims)].append(x)
            else:
                lt[x] = r.choice('RIP' if allow_p else 'RI')
        if any(len(s) == 2 for s in spec) and r.random() < 0.5:
            for s in spec:
                s.reverse()
        return Ty(shape, spec, lt)

    def new_param(self, shape, ty=None):
        name = self.fresh('x')
        t = ty or self.random_layout(shape)
        self.params.append((name, t))
        self.env[name] = t
        return name

    def emit(self, op, args, **attrs):
        r = self.r
        if op in COLLECTIVES and 'axes' in attrs and not attrs.get('frozen') and r.random() < 0.15:
            op = 'redistribute'
            attrs.pop('expert', None)
        if op == 'all_reduce' and attrs.get('src') == 'P' and r.random() < 0.3:
            attrs['rop'] = 'sum'
        if op in COLLECTIVES and r.random() < 0.15:   # the wire dtype written down: the program's own
            attrs['dtype'] = 'f64'
            if r.random() < 0.5:
                attrs['bwd_dtype'] = 'f64'
        st = St(self.fresh(), op, args, **attrs)
        t = type_st(st, self.env)      # raises Reject
        if t.numel() > MAX_NUMEL:
            raise SizeReject('too big')
        self.body.append(st)
        self.env[st.name] = t
        return st.name

    def pick(self, pred=lambda t: True):
        names = [n for n, t in list(self.env.items()) if isinstance(t, Ty) and pred(t)]
        if not names:
            return None
        # prefer recent values, so programs are chains rather than piles
        names.sort(key=lambda n: self.order(n))
        return names[-1] if self.r.random() < 0.5 else self.r.choice(names)

    def order(self, n):
        for i, st in enumerate(self.body):
            if st.name == n:
                return i + 1
        return 0

    def random_shape(self):
        r = self.r
        nd = r.choice((1, 2, 2, 2, 3))
        while True:
            s = tuple(r.choice(SIZES) for _ in range(nd))
            if prod(s) <= MAX_NUMEL:
                return s

    # -- moving a value to a target type, one axis at a time (or by redistribute)
    def align(self, name, target):
        t = self.env[name]
        if t == target:
            return name
        if self.r.random() < 0.25 or any(len(s) > 1 for s in t.spec + target.spec):
            return self.emit('redistribute', [name], T=target)
        # free the axes whose letter or dim changes; then set them
        for x in AXES:
            t = self.env[name]
            want_d = target.sdim(x)
            have = t.letter(x)
            if have == 'S' and t.sdim(x) == want_d:
                continue
            if have != 'S' and want_d is None and have == target.lt[x]:
                continue
            if have == 'S':
                d = t.sdim(x)
                if want_d is not None and not t.spec[want_d]:
                    name = self.emit('all_to_all', [name], axes=(x,), src='S(%d)' % d, dst='S(%d)' % want_d)
                    continue
                if want_d is None and target.lt[x] == 'P':
                    name = self.emit('convert', [name], axes=(x,), src='S(%d)' % d, dst='P', expert=True)
                    continue
                dst = 'I' if want_d is None and target.lt[x] == 'I' else 'R'
                name = self.emit('all_gather', [name], axes=(x,), src='S(%d)' % d, dst=dst)
                have = dst
            if have == 'P':
                if want_d is not None:
                    name = self.emit('reduce_scatter', [name], axes=(x,), src='P', dst='S(%d)' % want_d)
                    continue
                dst = target.lt[x] if target.lt[x] in 'RI' else 'R'
                name = self.emit('all_reduce', [name], axes=(x,), src='P', dst=dst)
                have = dst
            want = 'S' if want_d is not None else target.lt[x]
            if have == want:
                continue
            if want == 'S':
                name = self.emit('convert', [name], axes=(x,), src=have, dst='S(%d)' % want_d)
            elif (have, want) == ('I', 'R'):
                name = self.emit(self.r.choice(('convert', 'reinterpret')), [name], axes=(x,), src='I', dst='R')
            elif (have, want) == ('R', 'I'):
                name = self.emit('convert', [name], axes=(x,), src='R', dst='I', expert=True)
            elif want == 'P':
                name = self.emit('convert', [name], axes=(x,), src=have, dst='P', expert=have == 'I')
        if self.env[name] != target:
            name = self.emit('redistribute', [name], T=target)
        return name

    def operand(self, shape, target):
        """A value of `shape` lined up to `target`: an existing one or a new parameter."""
        cands = [n for n, t in self.env.items() if isinstance(t, Ty) and t.shape == shape]
        if cands and self.r.random() < 0.6:
            return self.align(self.r.choice(cands), target)
        if self.r.random() < 0.3:
            return self.align(self.new_param(shape), target)
        # parameters are never P: every rank gets the same values, which
        # would make the sum depend on the mesh
        return self.align(self.new_param(shape, self.unpartial(target)), target)

    def step(self):
        r = self.r
        kind = r.choices(['unary', 'binary', 'contract', 'reduce', 'shape', 'collective', 'scale', 'record',
                          'tuple', 'vary', 'attention', 'xent'], [3, 4, 4, 2, 2, 3, 1, 1, 2, 1, 1, 1])[0]
        a = self.pick()
        t = self.env[a]
        if kind == 'unary':
            if any(t.letter(x) == 'P' for x in AXES):
                a = self.align(a, self.unpartial(t))
            f = r.choice(UNARY + ('softmax', 'log_softmax'))
            if f in ('softmax', 'log_softmax'):
                t = self.env[a]
                free = [d for d in range(len(t.shape)) if not t.spec[d]]
                if not free:
                    return
                return self.emit(f, [a], dim=r.choice(free))
            return self.emit(f, [a])
        if kind == 'scale':
            return self.emit(r.choice(('scale', 'neg')), [a], c=r.choice(('0.5', '2.0', '-1.5')))
        if kind == 'binary':
            op = r.choice(('+', '-', '*'))
            target = self.partner(t, op)
            b = self.operand(t.shape, target)
            args = [a, b] if r.random() < 0.5 else [b, a]
            return self.emit(op, args)
        if kind == 'contract':
            return self.contract(a)
        if kind == 'reduce':
            if not t.shape:
                return
            d = r.randrange(len(t.shape))
            if r.random() < 0.3 and not t.spec[d]:
                return self.emit('mean', [a], dim=d)
            return self.emit('sum', [a], dim=d, out_partial=t.spec[d])
        if kind == 'shape':
            return self.reshape(a)
        if kind == 'record':
            return self.record(a)
        if kind == 'collective':
            return self.align(a, self.random_layout(t.shape, allow_p=True))
        if kind == 'tuple':
            return self.tuple_move(a)
        if kind == 'vary':
            return self.vary(a)
        if kind == 'attention':
            return self.attention()
        if kind == 'xent':
            return self.xent(a)

    def attention(self):
        """attention(q, k, v) on operands lined up to a random layout: the
        batch or the heads sharded (alike in q, k and v), the rest R or I."""
        r = self.r
        while True:
            B, H, T, S, E, Ev = (r.choice((2, 4)) for _ in range(6))
            Hkv = r.choice([h for h in (1, 2, 4) if H % h == 0])
            if max(B * H * T * E, B * Hkv * S * max(E, Ev), B * H * T * Ev) <= MAX_NUMEL:
                break
        spec = [[], [], [], []]
        lt = {}
        for x in AXES:
            dims = [d for d, n in ((0, B), (1, H)) if n % 4 == 0 and not (d == 1 and Hkv != H)]
            if dims and r.random() < 0.5:
                spec[r.choice(dims)].append(x)
            else:
                lt[x] = r.choice('RI')
        def ty(shape):
            return Ty(shape, spec, lt)
        q = self.operand((B, H, T, E), ty((B, H, T, E)))
        k = self.operand((B, Hkv, S, E), ty((B, Hkv, S, E)))
        v = self.operand((B, Hkv, S, Ev), ty((B, Hkv, S, Ev)))
        return self.emit('attention', [q, k, v], causal=r.random() < 0.6, scale=r.choice((None, '0.5')),
                         kv_len=r.choice((None, None, r.randint(1, S))))   # a cache's first keys

    def xent(self, a):
        """cross_entropy of [N, C] logits, the class dim whole or sharded
        (the vocabulary-parallel loss), against targets laid out as the rows."""
        r = self.r
        t = self.env[a]
        if len(t.shape) != 2:
            return
        if any(t.letter(x) == 'P' for x in AXES):
            a = self.align(a, self.unpartial(t))
            t = self.env[a]
        lt = {x: ('R' if x in t.spec[1] else t.letter(x)) for x in AXES if x not in t.spec[0]}
        T = Ty(t.shape, [t.spec[0], ()], lt)
        red = r.choice(('none', 'none', 'sum'))
        return self.emit('xent', [a], T=T, seed=r.randrange(1, 1000), reduction=red,
                         out_partial=tuple(t.spec[0]) if red == 'sum' else ())

    def tuple_move(self, a):
        """One collective or cast over both axes, as a tuple in either
        order, where both make the same move."""
        r = self.r
        t = self.env[a]
        axes = tuple(r.sample(AXES, 2))
        l0, l1 = (t.letter(x) for x in axes)
        moves = []
        if l0 == l1 == 'P':
            moves += [('all_reduce', 'P', d) for d in 'RI']
            moves += [('reduce_scatter', 'P', 'S(%d)' % d) for d in range(len(t.shape)) if not t.spec[d]]
        if l0 == l1 == 'R':
            moves += [('convert', 'R', 'P')]
            moves += [('convert', 'R', 'S(%d)' % d) for d in range(len(t.shape)) if not t.spec[d]]
        if l0 == l1 == 'I':
            moves += [('convert', 'I', 'R'), ('reinterpret', 'I', 'R')]
        for d, sp in enumerate(t.spec):
            if len(sp) == 2:   # gathered in the order that shards it (major to minor)
                axes = tuple(sp)
                moves += [('all_gather', 'S(%d)' % d, dst) for dst in 'RI']
        if not moves:
            return
        op, src, dst = r.choice(moves)
        if op == 'all_gather':
            axes = tuple(t.spec[int(src[2:-1])])
        return self.emit(op, [a], axes=axes, src=src, dst=dst)

    def vary(self, a):
        """op=avg|max|min over one value per rank: the copies of an I value
        claimed different (reinterpret(I -> V, expert=true)), whose mean,
        max and min are the value on every mesh.  max and min have no
        gradient, so they read a constant (randn)."""
        r = self.r
        rop = r.choice(('avg', 'avg', 'max', 'min'))
        t = self.env[a]
        if rop != 'avg':
            T = Ty(t.shape, t.spec, {x: ('I' if l == 'P' else l) for x, l in t.lt.items()})
            a = self.emit('randn', [], T=T, seed=r.randrange(1, 1000))
            t = self.env[a]
        axes = [x for x in AXES if t.letter(x) == 'I']
        if not axes:
            return
        axes = tuple(r.sample(axes, r.randint(1, len(axes))))
        v = self.emit('reinterpret', [a], axes=axes, src='I', dst='V', expert=True, frozen=True)
        free = [d for d, n in enumerate(t.shape) if not t.spec[d] and n % 4 == 0]
        if rop == 'avg' and free and r.random() < 0.4:   # the mean scattered (reduce_scatter op=avg)
            return self.emit('reduce_scatter', [v], axes=axes, src='V', dst='S(%d)' % r.choice(free), rop=rop,
                             frozen=True)
        return self.emit('all_reduce', [v], axes=axes, src='V', dst=r.choice('RI'), rop=rop, frozen=True)

    def unpartial(self, t):
        return Ty(t.shape, t.spec, {x: ('R' if l == 'P' else l) for x, l in t.lt.items()})

    def partner(self, t, op):
        """A type for the other operand of `t op _` that the rules accept."""
        lt = {}
        for x in AXES:
            l = t.letter(x)
            if l == 'S':
                continue
            if l == 'P':
                lt[x] = 'P' if op in '+-' else 'R'
            else:
                lt[x] = l
        return Ty(t.shape, t.spec, lt)

    def record(self, a):
        """Two values in a record, one collective or cast on the record (on
        every field), the fields taken out again."""
        r = self.r
        b = self.pick()
        ta, tb = self.env[a], self.env[b]
        axes = [x for x in AXES if ta.letter(x) == tb.letter(x) and ta.letter(x) in 'PIR']
        if not axes:
            return
        x = r.choice(axes)
        l = ta.letter(x)
        struct = '%s_R%d' % (self.name, len(self.structs))
        self.structs.append((struct, [('a', ta.decl_text()), ('b', tb.decl_text())]))
        rec = self.emit('record', [a, b], struct=struct, fields=('a', 'b'))
        if l == 'P':
            rec = self.emit('all_reduce', [rec], axes=(x,), src='P', dst=r.choice('RI'))
        elif l == 'I':
            rec = self.emit(r.choice(('convert', 'reinterpret')), [rec], axes=(x,), src='I', dst='R')
        else:
            rec = self.emit('convert', [rec], axes=(x,), src='R', dst='P')
        if r.random() < 0.4:   # some fields scaled (the optimizers' parameter groups)
            rec = self.emit('scale_fields', [rec], c=r.choice(('0.5', '-1.5')), sel=r.choice(('only', 'skip')),
                            globs=r.choice(('a', 'b', 'a|b')))
        self.emit('field', [rec], field='a')
        return self.emit('field', [rec], field='b')

    EINSUMS = ('ij,jk->ik', 'ij,kj->ik', 'ij,ij->i', 'ij,j->i', 'i,j->ij', 'bij,bjk->bik', 'ij,jk->ki',
               'i,i->')

    def contract(self, a):
        r = self.r
        t = self.env[a]
        eqs = [e for e in self.EINSUMS if len(e.split(',')[0]) == len(t.shape)]
        if not eqs:
            return
        eq = r.choice(eqs)
        la, rest = eq.split(',')
        lb, out = rest.split('->')
        if any(t.letter(x) == 'P' for x in AXES) and r.random() < 0.5:
            a = self.align(a, self.unpartial(t))
            t = self.env[a]
        size = dict(zip(la, t.shape))
        spec = dict(zip(la, t.spec))
        shape_b = []
        for c in lb:
            if c not in size:
                size[c] = r.choice(SIZES)
            shape_b.append(size[c])
        if prod(shape_b) > MAX_NUMEL or prod(size[c] for c in out) > MAX_NUMEL:
            return
        # b's layout: shared labels as in a; axes sharding a-only labels R; the rest free
        bspec = [list(spec.get(c, ())) for c in lb]
        lt = {}
        for x in AXES:
            d = t.sdim(x)
            if d is not None:
                if la[d] not in lb:
                    lt[x] = 'R'
                continue
            l = t.lt[x]
            if l == 'P':
                lt[x] = 'R'
            elif l == 'I':
                lt[x] = 'I'
            else:
                own = [i for i, c in enumerate(lb) if c not in la and c in out]
                if own and r.random() < 0.4:
                    bspec[r.choice(own)].append(x)
                else:
                    lt[x] = 'R'
        tb = Ty(shape_b, bspec, lt)
        b = self.operand(tuple(shape_b), tb)
        partial = tuple(x for c in la if c not in out for x in spec[c])
        if eq == 'ij,jk->ik' and r.random() < 0.5:
            return self.emit('matmul', [a, b], out_partial=partial)
        return self.emit('einsum', [a, b], eq=eq, out_partial=partial)

    def reshape(self, a):
        r = self.r
        t = self.env[a]
        n = len(t.shape)
        c = r.random()
        if n >= 2 and c < 0.4:
            if n == 2 or r.random() < 0.5:
                d0, d1 = r.sample(range(n), 2)
                return self.emit('transpose', [a], d0=d0, d1=d1)
            perm = list(range(n))
            r.shuffle(perm)
            return self.emit('permute', [a], perm=perm)
        # split the first dim of size 8 into 4 x 2 ... or merge two dims
        shapes = []
        if n >= 2:
            shapes.append(t.shape[:-2] + (t.shape[-2] * t.shape[-1],))
            shapes.append((t.shape[0] * t.shape[1],) + t.shape[2:])
        for d, m in enumerate(t.shape):
            if m == 8:
                shapes.append(t.shape[:d] + (4, 2) + t.shape[d + 1:])
                shapes.append(t.shape[:d] + (2, 4) + t.shape[d + 1:])
        r.shuffle(shapes)
        for s in shapes:
            if len(s) > 3:
                continue
            try:
                type_reshape(t, s)
            except Reject:
                continue
            return self.emit('reshape', [a], shape=s)


def generate(seed, name='f', steps=None):
    """A random well-typed program (by the model) from `seed`."""
    r = random.Random(seed)
    while True:
        g = Gen(r, name)
        for _ in range(r.choice((1, 1, 2))):
            g.new_param(g.random_shape())
        nsteps = steps if steps is not None else r.randint(3, 9)
        for _ in range(nsteps * 4):
            if len(g.body) >= nsteps:
                break
            saved = (list(g.params), list(g.body), dict(g.env), g.n, list(g.structs))
            try:
                g.step()
            except Reject:
                g.params, g.body, g.env, g.n, g.structs = saved
        loss = {x: r.choice('PI') for x in AXES}
        p = Program(name, g.params, g.body, loss, g.structs)
        try:
            p.typecheck()
        except Reject:
            continue
        return p


# ---------------------------------------------------------------- mutants

def mutants(p, rng):
    """(kind, description, statements) for each mutant of p that the model
    rejects; at most a few of each kind, chosen at random."""
    sts = p.statements()
    found = {}
    for i, st in enumerate(sts):
        cands = []
        if st.attrs.get('expert'):
            m = st.copy()
            m.attrs.pop('expert')
            cands.append(('expert', 'dropped expert=true in %s' % st.text(), m))
        if st.attrs.get('frozen'):
            # copies claimed different (expert=true): the program opted out
            # of the mesh's promise there, so another mutant of it may be
            # mesh-dependent and still be accepted
            cands = cands[:1] if st.attrs.get('expert') else []
            for kind, desc, m in cands:
                found.setdefault(kind, []).append((kind, desc, sts[:i] + [m] + sts[i + 1:]))
            continue
        if st.op in ('all_reduce', 'reduce_scatter') and st.attrs.get('src') == 'P':
            for rop in (('avg', 'max', 'min') if st.op == 'all_reduce' else ('avg',)):
                m = st.copy()
                m.attrs['rop'] = rop
                cands.append(('reduce_op', 'op=%s in %s' % (rop, st.text()), m))
        if st.is_collective() and st.attrs.get('src') in {'I', 'P'} | {'S(%d)' % d for d in range(4)} \
                and not st.attrs.get('dtype'):
            m = st.copy()
            m.attrs['dtype'] = 'f32'
            m.attrs.pop('bwd_dtype', None)
            cands.append(('wire_dtype', 'dtype=f32 without bwd_dtype= in %s' % st.text(), m))
        if st.is_collective():
            m = st.copy()
            m.op, m.args, m.attrs = 'alias', [st.args[0]], {}
            cands.append(('removed', 'removed %s' % st.text(), m))
            if 'src' in st.attrs:
                m = st.copy()
                m.attrs['src'], m.attrs['dst'] = st.attrs['dst'], st.attrs['src']
                cands.append(('swapped', 'swapped src/dst in %s' % st.text(), m))
            for key in ('src', 'dst'):
                v = st.attrs.get(key, '')
                if v.startswith('S('):
                    for d in range(4):
                        if 'S(%d)' % d != v:
                            m = st.copy()
                            m.attrs[key] = 'S(%d)' % d
                            cands.append(('shard_dim', '%s S(%d) in %s' % (key, d, st.text()), m))
            if st.op == 'redistribute' and 'T' in st.attrs:
                T = st.attrs['T']
                for x in AXES:
                    d = T.sdim(x)
                    if d is None:
                        continue
                    for e in range(len(T.shape)):
                        if e != d and not T.spec[e]:
                            spec = [list(s) for s in T.spec]
                            spec[d].remove(x)
                            spec[e].append(x)
                            m = st.copy()
                            m.attrs['T'] = Ty(T.shape, spec, T.lt)
                            cands.append(('shard_dim', 'moved %s to dim %d in %s' % (x, e, st.text()), m))
        if st.op == 'scale_fields':
            m = st.copy()
            m.attrs['globs'] = 'c'
            cands.append(('scale_fields_glob', 'a glob naming no field in %s' % st.text(), m))
        if st.attrs.get('out_partial'):
            m = st.copy()
            m.attrs['out_partial'] = ()
            cands.append(('out_partial', 'dropped out_partial_axes in %s' % st.text(), m))
        for kind, desc, m in cands:
            ms = sts[:i] + [m] + sts[i + 1:]
            try:
                p.typecheck(ms)
                continue  # the model accepts it: possibly an equivalent mutant, not produced
            except SizeReject:
                continue  # well-typed, only a size the runtime checks
            except Reject:
                pass
            found.setdefault(kind, []).append((kind, desc, ms))
    out = []
    for kind in sorted(found):
        rng.shuffle(found[kind])
        out += found[kind][:2]
    return out


def render(programs, header='mesh (dp, tp: 2);\n'):
    return header + '\n' + '\n'.join(p.text() for p in programs)
