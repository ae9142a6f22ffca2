"""The attention backward exercise (lesson 14): its cases, the bugs they catch, the references.

Every mistake the lesson warns about is replayed by ``simulate``, the blocked backward pass in
NumPy with one switch per mistake, for every block size a learner may pick: a bug is named only
when its replay gives the learner's output. The learner returns dq, dk and dv as one tensor
(concatenated along the sequence axis), so one comparison covers all three.
"""

from __future__ import annotations

import math
from functools import partial

from learning.exercises.attention.exercise import _REPLAY_TOLERANCE, _out_dtype, replay
from learning.exercises.attention_backward import explainer as worked_example
from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, rounded_output
from learning.grader.tensors import TensorSpec, round_to_dtype

# Block sizes a learner may pick: the replays of mistakes that depend on them try each.
TILES = (16, 32, 64)


def _np():
    import numpy as np

    return np


class Refused(ValueError):
    """Causal attention with seq_q != seq_k: the function must refuse it (a case says so)."""


def _lengths(q, k, causal: bool):
    lq, lk = _np().shape(q)[-2], _np().shape(k)[-2]
    if causal and lq != lk:
        raise Refused(f"causal attention with {lq} queries and {lk} keys")
    return lq, lk


# ---------------------------------------------------------------------------------------------
# References: float64, run only in the grader's process.


def forward(q, k, v, causal):
    """The forward pass in float64: (o, lse), what the backward pass is given."""
    np = _np()
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    scores = q @ np.swapaxes(k, -1, -2) / math.sqrt(q.shape[-1])
    if causal:
        lq, lk = q.shape[-2], k.shape[-2]
        scores = np.where(np.arange(lk)[None, :] > np.arange(lq)[:, None], -np.inf, scores)
    top = scores.max(-1, keepdims=True)
    lse = top[..., 0] + np.log(np.exp(scores - top).sum(-1))
    return np.exp(scores - lse[..., None]) @ v, lse


def reference(q, k, v, o, do, lse, causal=False, block=None):
    """dq, dk and dv (concatenated along the sequence axis) in float64, from the arguments as
    given (``block`` changes nothing). Causal with seq_q != seq_k, which a case requires the
    function to refuse, gives NaN: the grader judges that case by the error alone."""
    np = _np()
    try:
        _lengths(q, k, causal)
    except Refused:
        lq, lk = np.shape(q)[-2], np.shape(k)[-2]
        return np.full(np.shape(q)[:-2] + (lq + 2 * lk, np.shape(q)[-1]), np.nan)
    return simulate(q, k, v, o, do, lse, causal, block_m=max(np.shape(q)[-2], 1),
                    block_n=max(np.shape(k)[-2], 1))


def simulate(q, k, v, o, do, lse, causal, block_m, block_n, *, delta="do-o", p_form="scaled",
             masked=("dkdv", "dq"), scaled=("dk", "dq"), overwrite=(), skip=False,
             acc_dtype=None, diagonal_hidden=False):
    """The backward pass by blocks, as the two kernels compute it, with switches for the
    lesson's mistakes:

    - ``delta``: D = rowsum(dO * O) ("do-o"); "do" rowsum(dO), "do-v" rowsum(dO * V) (V's
      rows of the queries' indices: only where V has as many), "none" (D left out, dS = P * dP);
    - ``p_form``: P recomputed from the scores times 1/sqrt(d) ("scaled", as the forward did),
      times 1 ("unscaled") or times 1/d ("1/d");
    - ``masked``: the passes that hide the keys past the diagonal when ``causal`` (the dK, dV
      pass "dkdv" and the dQ pass "dq");
    - ``scaled``: the gradients multiplied by 1/sqrt(d) ("dk", "dq");
    - ``overwrite``: the gradients set to the last block's contribution instead of summed over
      the blocks ("dkdv", or "dk" or "dv" alone: over query blocks; "dq": over key blocks);
    - ``skip``: with ``causal``, each pass reads only the blocks a causal kernel that skips
      the rest reads (the dQ pass, the key blocks that start before the end of the query
      block; the dK, dV pass, the query blocks from the one holding the key block's first
      row): what a missing mask or an overwrite then sums differs;
    - ``acc_dtype``: the accumulators rounded to this dtype after every block;
    - ``diagonal_hidden``: the causal mask off by one, hiding key i from query i too.
    """
    np = _np()
    q, k, v, o, do, lse = (np.asarray(x, dtype=np.float64) for x in (q, k, v, o, do, lse))
    lq, lk = _lengths(q, k, causal)
    d = q.shape[-1]
    scale = 1 / math.sqrt(d)
    factor = {"scaled": scale, "unscaled": 1.0, "1/d": 1 / d}[p_form]
    with np.errstate(all="ignore"):
        p = np.exp(q @ np.swapaxes(k, -1, -2) * factor - lse[..., None])  # (..., lq, lk)
        if delta == "do-v" and v.shape[-2] < lq:
            raise ValueError("rowsum(dO * V) needs a row of V for every query")
        # dO * V as a query's loop writes it: v's row of the same index as the query's
        rowsum = {"do-o": lambda: (do * o).sum(-1), "do": lambda: do.sum(-1),
                  "do-v": lambda: (do * v[..., :lq, :]).sum(-1),
                  "none": lambda: 0.0 * lse}[delta]()
        dp = do @ np.swapaxes(v, -1, -2)  # (..., lq, lk)
        keys, queries = np.arange(lk)[None, :], np.arange(lq)[:, None]
        hidden = ((keys >= queries) if diagonal_hidden else (keys > queries)) & causal

        def pass_of(name):
            pp = np.where(hidden, 0.0, p) if name in masked else p
            return pp, pp * (dp - rowsum[..., None])

        def rounded(x):
            return x if acc_dtype is None else round_to_dtype(x, acc_dtype)

        p_kv, ds_kv = pass_of("dkdv")
        if skip and causal:  # query rows before each key block's first query block: unread
            first = (np.arange(lk) // block_n * block_n) // block_m * block_m  # (lk,)
            read = np.arange(lq)[:, None] >= first[None, :]
            p_kv, ds_kv = np.where(read, p_kv, 0.0), np.where(read, ds_kv, 0.0)
        over_k = "dkdv" in overwrite or "dk" in overwrite
        over_v = "dkdv" in overwrite or "dv" in overwrite
        dk, dv = np.zeros(k.shape), np.zeros(v.shape)
        for start in range(0, lq, block_m):
            rows = slice(start, start + block_m)
            part_v = np.swapaxes(p_kv[..., rows, :], -1, -2) @ do[..., rows, :]
            part_k = np.swapaxes(ds_kv[..., rows, :], -1, -2) @ q[..., rows, :]
            dv = rounded(part_v) if over_v else rounded(dv + part_v)
            dk = rounded(part_k) if over_k else rounded(dk + part_k)
        _, ds_q = pass_of("dq")
        dq = np.zeros(q.shape)
        ends = np.minimum((np.arange(lq) // block_m + 1) * block_m, lk) if skip else \
            np.full(lq, lk)
        for start in range(0, lk, block_n):
            cols = slice(start, start + block_n)
            part = ds_q[..., :, cols] @ k[..., cols, :]
            new = rounded(part) if "dq" in overwrite else rounded(dq + part)
            dq = np.where((start < ends)[:, None], new, dq)
        if "dq" in scaled:
            dq = dq * scale
        if "dk" in scaled:
            dk = dk * scale
        return np.concatenate((dq, dk, dv), axis=-2)


def _stored(x, args):
    return round_to_dtype(x, _out_dtype(args))


# ---------------------------------------------------------------------------------------------
# Replays.


class replay_per_gradient(replay):  # noqa: N801 - used like a function, as replay is
    """``replay`` for a kernel's three gradients, each compared against the dtype's relative
    tolerance of its own largest value as well as of each entry (dq, then dk, then dv down the
    rows). A kernel rounds each term of a sum relative to the terms (tl.dot rounds float32 to
    TF32 on a GPU), not to the sum: where a mistake makes a gradient's terms large (P without
    the scale, or past a missing causal mask, where it exceeds 1; dk or dq without the 1 /
    sqrt(d)) and they cancel to a small entry, that entry is off by far more than its own
    tolerance. Measured on an H200: every catalogued mistake within 0.42 of this tolerance,
    four of them (seven cases) beyond the plain one (lab/results/backward_replay.txt)."""

    def _close(self, got, buggy, atol, rtol, args) -> bool:
        np = _np()
        from learning.grader.numbers import close

        seq_q = np.shape(args[0])[-2]
        seq_k = (np.shape(buggy)[-2] - seq_q) // 2
        for rows in (slice(0, seq_q), slice(seq_q, seq_q + seq_k), slice(seq_q + seq_k, None)):
            part = buggy[..., rows, :]
            with np.errstate(all="ignore"):
                largest = float(np.nanmax(np.abs(np.where(np.isfinite(part), part, 0.0)),
                                          initial=0.0))
            if not close(got[..., rows, :], part, max(atol, rtol * largest), rtol).all():
                return False
        return True

    def __call__(self, got, args, want) -> bool:
        from learning.grader.numbers import close

        atol, rtol = _REPLAY_TOLERANCE[_out_dtype(args)]
        buggy = self._buggy(args)
        if buggy is None or buggy.shape != got.shape or close(got, want, atol, rtol).all():
            return False
        return self._close(got, buggy, atol, rtol, args)

    def explains(self, got, args, want, atol: float, rtol: float) -> bool | None:
        from learning.grader.numbers import close

        buggy = self._buggy(args)
        if buggy is None or buggy.shape != want.shape or close(buggy, want, atol, rtol).all():
            return None
        if buggy.shape != got.shape:
            return False
        return self._close(got, buggy, max(atol, self.atol), max(rtol, self.rtol), args)


def _triton_replay(*switch_sets, tiles=TILES):
    """Evidence for a Triton mistake with one or more forms (keyword sets for simulate), each
    tried for every pair of block sizes, and where it matters for kernels that skip the key
    blocks past the diagonal."""
    def run(form):
        def reproduce(q, k, v, o, do, lse, causal):
            switches = dict(form)
            if switches.get("acc_dtype") == "input":  # the accumulators in q's own dtype
                switches["acc_dtype"] = _out_dtype((q,))
            return _stored(simulate(q, k, v, o, do, lse, causal, **switches), (q,))

        return replay_per_gradient(reproduce)

    forms = [dict(switches, block_m=m, block_n=n, skip=skip) for switches in switch_sets
             for m in tiles for n in tiles for skip in (False, True)]
    return any_of(*(run(form) for form in forms))


def _python_replay(*switch_sets):
    """The same for the Python part: blocks of the case's own size."""
    def run(switches):
        def reproduce(q, k, v, o, do, lse, causal, block):
            return simulate(q, k, v, o, do, lse, causal, block_m=block, block_n=block,
                            **switches)

        return replay(reproduce)

    return any_of(*(run(switches) for switches in switch_sets))


_DELTAS = ({"delta": "do"}, {"delta": "do-v"}, {"delta": "none"})
_P_FORMS = ({"p_form": "unscaled"}, {"p_form": "1/d"})
_SCALES = ({"scaled": ("dk",)}, {"scaled": ("dq",)}, {"scaled": ()})


def _read_as_contiguous(x):
    """What a kernel that assumes contiguous (batch, heads, seq, d) strides reads of ``x``."""
    np = _np()
    storage = getattr(x, "storage", None)
    if storage is None:
        raise ValueError("no memory to replay")
    return np.asarray(storage)[:int(np.prod(np.shape(x)))].reshape(np.shape(x))


def _strides_assumed(q, k, v, o, do, lse, causal, assumed: str = "qkvod"):
    """The inputs named in ``assumed`` (q, k, v, o and d for do) read with contiguous strides,
    the others with their own."""
    np = _np()
    q, k, v, o, do = (_read_as_contiguous(x) if name in assumed else np.asarray(x)
                      for name, x in zip("qkvod", (q, k, v, o, do)))
    got = simulate(q, k, v, o, do, lse, causal, block_m=max(np.shape(q)[-2], 1),
                   block_n=max(np.shape(k)[-2], 1))
    return _stored(got, (q,))


def _common_bugs(python: bool) -> tuple[Bug, ...]:
    evidence = _python_replay if python else _triton_replay
    hint = (lambda p, t: p) if python else (lambda p, t: t)
    return (
        Bug("delta-wrong", "D, the sum subtracted from dP, is not rowsum(dO * O): it is lesson "
            "11's dot of y and dy, here sum over j of P * dP = dO . O, one number per query "
            "row. Not rowsum(dO), not rowsum(dO * V), and not left out",
            evidence(*_DELTAS), hint=hint(1, 2)),
        Bug("p-scale", "P is not recomputed with the forward's scores: the log-sum-exp L was "
            "taken of q . k / sqrt(d), so P = exp(q . k / sqrt(d) - L), with the same "
            "1 / sqrt(d) (not 1, not 1 / d)",
            evidence(*_P_FORMS),
            hint=hint(2, 3)),
        Bug("grad-scale", "dQ or dK lacks the scale: the scores are q . k / sqrt(d), so the "
            "chain rule multiplies both dS K and dS^T Q by 1 / sqrt(d)",
            evidence(*_SCALES), hint=hint(3, 4)),
        Bug("causal-ignored", "keys past the diagonal were not hidden, as if there were no "
            "causal mask: with causal set, query i sees only keys j <= i, so P (and with it "
            "dS) must be 0 for every key j > i. " + (
                "Skip the pairs with j > i" if python else
                "In both kernels, with CAUSAL, the mask must compare each key's column with "
                "its own query's row, visible = visible & (cols[None, :] <= rows[:, None]), "
                "and both be launched with CAUSAL=causal"),
            evidence({"masked": ()}), hint=hint(2, 3)),
        Bug("causal-off-by-one", "the causal mask is off by one: query i sees keys j <= i, "
            "itself included, so only the keys j > i are hidden (hiding j >= i leaves row 0 "
            "with no key at all)", evidence({"diagonal_hidden": True}), hint=hint(2, 3)),
    )


# ---------------------------------------------------------------------------------------------
# Lesson 14, part 1: attention_backward_python(q, k, v, o, do, lse, causal, block), one head.

PYTHON_BUGS = _common_bugs(python=True) + (
    Bug("missing-error", "causal attention with seq_q != seq_k is ambiguous (which keys does "
        "query i see?): raise ValueError when causal and len(q) != len(k)", hint=1),
    Bug("wrong-length", "the output is one list of Lq + 2 * Lk rows, each of d numbers: dq's "
        "rows, then dk's, then dv's (return dq + dk + dv)", hint=3),
    Bug("rounded", "the outputs are rounded: return the full-precision values", rounded_output),
)


def _with_forward(q, k, v, do, causal):
    """q, k, v, o, do, lse and causal, o and lse from the float64 forward pass (for causal
    with seq_q != seq_k, which must be refused, the non-causal ones)."""
    lq, lk = len(q), len(k)
    o, lse = forward(q, k, v, causal and lq == lk)
    return q, k, v, o.tolist(), do, lse.tolist(), causal


def _lists(q, k, v, do, causal, block):
    return lambda: (*_with_forward(q, k, v, do, causal), block)


def _seeded(seed: int, lq: int, lk: int, d: int, causal: bool, block: int):
    """q, k, v and dO of six-decimal values in [-1, 1]."""
    def make():
        import random

        rng = random.Random(seed)

        def rows(n):
            return [[round(rng.uniform(-1, 1), 6) for _ in range(d)] for _ in range(n)]

        q, k, v, do = rows(lq), rows(lk), rows(lk), rows(lq)
        return (*_with_forward(q, k, v, do, causal), block)

    return make


WORKED_Q, WORKED_K, WORKED_V, WORKED_DO = worked_example.worked()

PYTHON_CASES = (
    Case("worked example", "the lesson's 2 queries and 3 keys, d = 2, in blocks of 2: every "
         "intermediate is in `explain attention_backward`",
         _lists(WORKED_Q, WORKED_K, WORKED_V, WORKED_DO, False, worked_example.WORKED_BLOCK),
         catches=("delta-wrong", "p-scale", "grad-scale")),
    Case("causal", "causal, 5 queries and keys in blocks of 2: query i's row of P is 0 past "
         "key i, in dV, dK and dQ alike", _seeded(1, 5, 5, 4, True, 2),
         catches=("causal-ignored", "delta-wrong", "grad-scale")),
    Case("lengths off the blocks", "4 queries and 7 keys in blocks of 3: the last block of "
         "each is cut short", _seeded(2, 4, 7, 4, False, 3),
         catches=("delta-wrong", "p-scale", "grad-scale")),
    Case("one key", "a single key: P is 1 for every query, so dS is 0 and dV is the sum of "
         "dO's rows", _seeded(3, 3, 1, 4, False, 2), catches=()),
    Case("causal, seq_q != seq_k", "causal with 3 queries and 5 keys has no agreed meaning: "
         "it must raise ValueError", _seeded(4, 3, 5, 4, True, 2),
         catches=("missing-error",), raises="ValueError"),
)

# ---------------------------------------------------------------------------------------------
# Lesson 14, part 2: attention_backward_triton(q, k, v, o, do, lse, causal) on 4-D tensors.

FP32 = Tolerance(atol=1e-3, rtol=1e-3)  # float32 in, P and dS rounded to TF32 by tl.dot on a GPU
FP16 = Tolerance(atol=4e-3, rtol=4e-3)  # float16 in, P and dS rounded to float16, outputs too

TRITON_BUGS = _common_bugs(python=False) + (
    Bug("causal-one-pass", "the causal mask is applied in one kernel and not the other: dK "
        "and dV, and dQ, all need P = 0 for keys j > i. With CAUSAL, hide those keys in both "
        "kernels", _triton_replay({"masked": ("dkdv",)}, {"masked": ("dq",)}), hint=3),
    Bug("not-accumulated", "a gradient holds only the last block's share: dK and dV are sums "
        "over every block of queries, dQ over every block of keys. Start them at 0 before the "
        "loop and add to them (dk += ...), never assign (dk = ...) inside it",
        _triton_replay({"overwrite": ("dkdv",)}, {"overwrite": ("dq",)},
                       {"overwrite": ("dkdv", "dq")}, {"overwrite": ("dk",)},
                       {"overwrite": ("dv",)}), hint=4),
    Bug("acc-16-bit", "an accumulator is kept in the inputs' 16-bit dtype: each block's sum is "
        "rounded to float16, whose steps near 30,000 are 16 wide, and those roundings add up. "
        "Keep dk, dv and dq in tl.float32 and convert once, at the store",
        _triton_replay({"acc_dtype": "input"}), hint=4),
    Bug("strides-assumed", "the kernels assumed contiguous (batch, heads, seq, d) tensors: a "
        "(batch, seq, heads, d) tensor transposed has other strides. Pass each tensor's "
        "stride(0), stride(1) and stride(2) and use them",
        any_of(*(replay(partial(_strides_assumed, assumed=names))
                 for names in ("qkvod", "qkv", "q", "k", "v", "o", "d"))), hint=5),
    Bug("missing-error", "causal attention with seq_q != seq_k is ambiguous (which keys does "
        "query i see?): raise ValueError when causal and q.shape[2] != k.shape[2]", hint=5),
    Bug("out-of-bounds", "a load or store reached outside the tensors. Lengths off the blocks "
        "need masks: query rows at or past seq_q in the loads of q, o, do and lse and the "
        "store of dq; keys at or past seq_k in the loads of k and v and the stores of dk and "
        "dv", hint=2),
    Bug("wrong-dtype", "the output must have q's dtype: accumulate in float32, then store "
        ".to(dq_ptr.dtype.element_ty) into tensors allocated with dtype=q.dtype", hint=5),
)


def _eighths(rng, shape, low=-16, high=16):
    """Random multiples of 1/8 in [low / 8, high / 8): exact in float32, TF32 and float16."""
    return rng.integers(low, high, shape) / 8.0


def _heads(seed: int, batch: int, heads: int, lq: int, lk: int, d: int, causal: bool, *,
           dtype: str = "float32", layout: str | tuple = "contiguous", fill=None):
    """q, k, v, o, do (``layout`` each, or one layout per tensor in that order), lse (float32)
    and causal; o and lse come from the float64 forward pass of the stored q, k and v.
    ``fill(rng, q, k, v, do)`` reshapes the values for a case's purpose."""
    layouts = (layout,) * 5 if isinstance(layout, str) else layout

    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        q = _eighths(rng, (batch, heads, lq, d))
        k = _eighths(rng, (batch, heads, lk, d))
        v = _eighths(rng, (batch, heads, lk, d), -8, 8)
        do = _eighths(rng, (batch, heads, lq, d), -8, 8)
        if fill is not None:
            q, k, v, do = fill(rng, q, k, v, do)
        q, k, v, do = (round_to_dtype(x, dtype) for x in (q, k, v, do))
        o, lse = forward(q, k, v, causal and lq == lk)
        return (*(TensorSpec(x, dtype=dtype, layout=kept, guard=math.nan)
                  for x, kept in zip((q, k, v, o, do), layouts)),
                TensorSpec(lse, dtype="float32", guard=math.nan), causal)

    return make


def _normal(rng, q, k, v, do):
    return tuple(rng.standard_normal(x.shape) for x in (q, k, v, do))


def _one_key_big_do(rng, q, k, v, do):
    """q = 0 and one key, so P = 1 and dV = the sum of dO's rows; dO near +1000 in the first
    half of the queries and -1000 in the second: the running sum climbs past 30,000 and falls
    back to a few hundred."""
    np = _np()
    half = do.shape[-2] // 2
    sign = np.where(np.arange(do.shape[-2]) < half, 1.0, -1.0)[None, None, :, None]
    return 0.0 * q, k, v, sign * (1000.0 + rng.integers(0, 9, do.shape))


TRITON_CASES = (
    Case("one block", "16 queries and 16 keys, d = 16: one block of each, so only the "
         "formulas can be wrong", _heads(1, 1, 1, 16, 16, 16, False),
         catches=("delta-wrong", "p-scale", "grad-scale")),
    Case("lengths off the blocks", "20 queries and 25 keys: the last block of queries and of "
         "keys are both cut, and each gradient sums two blocks",
         _heads(2, 1, 1, 20, 25, 16, False),
         catches=("out-of-bounds", "not-accumulated", "delta-wrong", "grad-scale")),
    Case("causal", "causal, 40 queries and keys: P is 0 past the diagonal in both kernels, "
         "and some blocks are all hidden", _heads(3, 1, 1, 40, 40, 16, True),
         catches=("causal-ignored", "causal-one-pass", "not-accumulated")),
    Case("batch x heads", "causal, 2 batches of 3 heads, 12 queries and keys: each program "
         "finds its own head from program_id(1)", _heads(4, 2, 3, 12, 12, 16, True),
         catches=("causal-ignored",)),
    Case("head dim 64", "d = 64: the scale is 1 / 8 in P, dQ and dK",
         _heads(5, 1, 1, 16, 24, 64, False), catches=("p-scale", "grad-scale")),
    Case("(batch, seq, heads, d) transposed", "q, k, v, o and dO as models hold them: (2, 12, "
         "2, 16) tensors transposed to (2, 2, 12, 16), strides (384, 16, 32, 1)",
         _heads(6, 2, 2, 12, 12, 16, False, layout="seq-heads"),
         catches=("strides-assumed",)),
    Case("k and v laid out apart", "k contiguous and v a (batch, seq, heads, d) tensor "
         "transposed: each is read with its own strides, not the other's",
         _heads(10, 2, 2, 12, 12, 16, False,
                layout=("contiguous", "contiguous", "seq-heads", "contiguous", "contiguous")),
         catches=()),
    Case("float16", "float16 inputs: P, dP and dS in float32, the gradients rounded once to "
         "float16", _heads(7, 1, 1, 20, 30, 16, False, dtype="float16", fill=_normal),
         catches=("wrong-dtype",), tolerance=FP16),
    Case("float16 accumulator", "float16, one key and 64 queries with dO near +1000, then "
         "-1000: dV's running sum climbs past 30,000 before it falls back",
         _heads(8, 1, 1, 64, 1, 16, False, dtype="float16", fill=_one_key_big_do),
         catches=("acc-16-bit",), tolerance=FP16),
    Case("causal, seq_q != seq_k", "causal with 8 queries and 12 keys has no agreed meaning: "
         "it must raise ValueError", _heads(9, 1, 1, 8, 12, 16, True),
         catches=("missing-error",), raises="ValueError"),
)

PYTHON_HINTS = (
    "Start with the checks and the scale: raise ValueError if causal and len(q) != len(k); "
    "scale = 1 / math.sqrt(len(q[0])); delta[i] = sum of do[i][c] * o[i][c] over c.",
    "dq, dk and dv start as rows of zeros (Lq, Lk and Lk rows of d). For each block of keys, "
    "for each block of queries, for each pair (i, j) with not (causal and j > i): p = "
    "math.exp(scale * (q[i] . k[j]) - lse[i]).",
    "dp = do[i] . v[j]; ds = p * (dp - delta[i]); dv[j][c] += p * do[i][c]; dk[j][c] += ds * "
    "q[i][c] * scale; dq[i][c] += ds * k[j][c] * scale. Return dq + dk + dv.",
)

TRITON_HINTS = (
    "Two kernels: one program of attention_backward_dkdv_kernel per (block of keys, batch * "
    "heads), one of attention_backward_dq_kernel per (block of queries, batch * heads); batch "
    "= program_id(1) // n_heads, head = program_id(1) % n_heads; move each pointer to its head.",
    "In each loop, load the other side's block with a mask (rows < seq_q or cols < seq_k, "
    "other=0.0), and lse with mask=rows < seq_q; delta, once per block of queries:\n"
    "    delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)",
    # code on lines of its own, indented by four spaces, so that no terminal breaks it
    "Recompute P from the saved log-sum-exp, 0 where a key is hidden:\n"
    "    s = tl.dot(q, tl.trans(k)) * scale\n"
    "    visible = (rows[:, None] < seq_q) & (cols[None, :] < seq_k)\n"
    "    if CAUSAL:\n"
    "        visible = visible & (cols[None, :] <= rows[:, None])\n"
    "    p = tl.where(visible, tl.exp(s - lse[:, None]), 0.0)",
    "Accumulate in float32 (tl.zeros(..., tl.float32)); multiply dk and dq by scale after "
    "the loop. In the dK, dV kernel:\n"
    "    dv += tl.dot(tl.trans(p.to(do.dtype)), do)\n"
    "    dp = tl.dot(do, tl.trans(v))\n"
    "    ds = p * (dp - delta[:, None])\n"
    "    dk += tl.dot(tl.trans(ds.to(q.dtype)), q)\n"
    "In the dQ kernel, with p and ds made the same way:\n"
    "    dq += tl.dot(ds.to(k.dtype), k)",
    "In attention_backward_triton, after the ValueError: allocate the gradients in q's "
    "dtype, pass each kernel every tensor's first three strides and lse's first two, "
    "n_heads, seq_q, seq_k and the scale, and stack the three:\n"
    "    dq = torch.empty(q.shape, dtype=q.dtype, device=q.device)  # dk, dv too\n"
    "    scale = 1 / math.sqrt(d)\n"
    "    return torch.cat((dq, dk, dv), dim=2)",
)

def _for_pair(loops: dict, args: tuple) -> str:
    if "i" in loops and "j" in loops:
        return f"for query {loops['i']} and key {loops['j']}"
    return ""


# The lesson's steps for one head: D once per query, then for each pair of a query and a key
# that sees it, P recomputed, dP, dS (the accumulations into dV, dK and dQ are the output).
PYTHON_STEPS = Steps(("delta", "p", "dp", "ds"), _for_pair)

def gradients(q, k, *_):
    """The three gradients the output stacks along the sequence axis, and their lengths."""
    np = _np()
    lq, lk = np.shape(q)[-2], np.shape(k)[-2]
    return (("dQ", lq), ("dK", lk), ("dV", lk))


EXERCISE = Exercise(
    name="attention_backward",
    title="FlashAttention backward: the softmax backward over blocks, P recomputed",
    lessons=("14-attention-backward.md",),
    parts=(
        Part("python", "attention_backward_python: one head, blocks of keys and queries",
             lesson="14", function="attention_backward_python", reference=reference,
             cases=PYTHON_CASES, tolerance=Tolerance(atol=1e-12, rtol=1e-9),
             bugs=PYTHON_BUGS, returns="list", hints=PYTHON_HINTS, steps=PYTHON_STEPS,
             pieces=gradients, plain_python=True),
        Part("triton", "attention_backward_triton: a dK, dV kernel and a dQ kernel",
             lesson="14", function="attention_backward_triton", reference=reference,
             cases=TRITON_CASES, tolerance=FP32, bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("dot",), ("mul", "add")),
             torch_answers=("scaled_dot_product_attention", "softmax", "_softmax", "matmul", "mm",
                            "bmm", "baddbmm", "einsum"),
             hints=TRITON_HINTS, pieces=gradients),
    ),
)
