"""The attention exercise (lesson 13): its cases, the bugs they catch, the references.

Every mistake the lesson warns about is replayed by ``simulate``, the blocked algorithm in NumPy
with one switch per mistake, for every block size a learner may pick: a bug is named only when
its replay gives exactly the learner's output. The Triton cases hold multiples of 1/8 (exact in
float32 and in TF32, which tl.dot uses for float32 on NVIDIA GPUs), so that every score is exact
and only the probabilities' rounding in p @ v separates a GPU's output from the float64 one.
"""

from __future__ import annotations

import math
from functools import partial

from learning.exercises.attention import explainer as worked_example
from learning.grader.declarations import Bug, Case, Exercise, Part, Steps, Tolerance
from learning.grader.replays import any_of, raises_like, rounded_output, same_as
from learning.grader.tensors import TensorSpec, round_to_dtype

# Block sizes a learner may pick: the replays of mistakes that depend on them try each.
TILES = (16, 32, 64, 128)


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


def reference(q, k, v, causal=False, block=None):
    """softmax(q k^T / sqrt(d)) v in float64 over the last two axes (``block`` changes nothing).

    For causal attention with seq_q != seq_k, which a case requires the function to refuse,
    the reference is NaN: the grader judges that case by the error alone."""
    np = _np()
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    try:
        _lengths(q, k, causal)
    except Refused:
        return np.full(q.shape[:-1] + (v.shape[-1],), np.nan)
    return simulate(q, k, v, causal, block_n=max(k.shape[-2], 1))


def simulate(q, k, v, causal, block_n, block_m=1, *, mask_value=-math.inf,
             pad_value=-math.inf, skip=False, order="forward", shift="running", guard=True,
             rescale_acc=True, rescale_sum=True, normalise="end", causal_shift=0,
             scale_form="before", acc_dtype=None, raw_exp=False, causal_mask=True,
             causal_reversed=False, causal_hides_pad=False):
    """Attention by blocks of ``block_n`` keys with a running (max, sum, accumulator), as the
    kernel computes it, with switches for the lesson's mistakes:

    - ``mask_value``: the score a causally hidden key gets (-inf; 0 is the mistake);
      ``pad_value``: the score of the padding past seq_k in the last block (its v reads 0);
    - ``skip``: each query row visits only the key blocks that start before the end of its block
      of ``block_m`` query rows (a causal kernel that skips the blocks above the diagonal);
    - ``order``: "forward" from key 0, or "reverse" from the last visited block;
    - ``shift``: "running" measures each block from the new running maximum; "block" from the
      block's own maximum, then scales the block's sums by exp(block max - running max);
    - ``guard``: measure from 0 where a maximum is still -inf (A1's guard);
    - ``rescale_acc`` / ``rescale_sum``: multiply the accumulator / the sum by exp(m_old - m_new);
    - ``normalise``: "end" (once, after the loop), "block" (acc / l inside the loop, never
      after), "both" (inside the loop and after), "never" (the output is acc itself);
    - ``causal_shift``: query i sees keys j <= i + causal_shift (0; -1 and 1 are off by one);
    - ``scale_form``: "before" (scores times 1/sqrt(d)), "none", "after" (the output times
      1/sqrt(d)), "inverse" (scores times sqrt(d)), "d" (scores times 1/d), "exp2" (scores
      times ln(2)/sqrt(d): every exponential taken in base 2, 2**(s - m), with no log2(e));
    - ``acc_dtype``: round the accumulator to this dtype after every block;
    - ``raw_exp``: exp(score) in float32 with no maximum at all;
    - ``causal_mask``: hide the keys past the diagonal when ``causal`` (False: every key seen,
      the mask forgotten; causal with seq_q != seq_k is still refused).
    - ``causal_reversed``: hide the keys before the diagonal instead (query i sees keys
      j >= i + causal_shift: the comparison turned round).
    - ``causal_hides_pad``: the causal mask also covers the padding past seq_k (a kernel whose
      only mask is the causal one: the padding past the diagonal gets ``mask_value``, the
      rest keeps ``pad_value``).
    """
    np = _np()
    q, k, v = (np.asarray(x, dtype=np.float64) for x in (q, k, v))
    lq, lk = _lengths(q, k, causal)
    d = q.shape[-1]
    scale = {"before": 1 / math.sqrt(d), "none": 1.0, "after": 1.0, "inverse": math.sqrt(d),
             "d": 1 / d, "exp2": math.log(2) / math.sqrt(d)}[scale_form]
    n_blocks = max(-(-lk // block_n), 1)
    width = n_blocks * block_n
    with np.errstate(all="ignore"):
        scores = np.full(q.shape[:-1] + (width,), float(pad_value))  # (..., lq, width)
        scores[..., :lk] = (q @ np.swapaxes(k, -1, -2)) * scale
        values = np.zeros(v.shape[:-2] + (width, v.shape[-1]))  # the padding reads v = 0
        values[..., :lk, :] = v
        rows, cols = np.arange(lq)[:, None], np.arange(width)[None, :]
        if causal and causal_mask:
            hidden = (cols < rows + causal_shift) if causal_reversed else \
                (cols > rows + causal_shift)
            if not causal_hides_pad:
                hidden = hidden & (cols < lk)
            scores = np.where(hidden, float(mask_value), scores)
        visited = np.ones((lq, n_blocks), dtype=bool)
        if causal and skip:
            ends = np.minimum((np.arange(lq) // block_m + 1) * block_m, lk)  # (lq,)
            visited = np.arange(n_blocks)[None, :] * block_n < ends[:, None]
        m = np.full(q.shape[:-1], -np.inf)
        total = np.zeros(q.shape[:-1])
        acc = np.zeros(q.shape[:-1] + (v.shape[-1],))
        blocks = range(n_blocks) if order == "forward" else range(n_blocks - 1, -1, -1)
        for b in blocks:
            s = scores[..., b * block_n:(b + 1) * block_n]  # (..., lq, block_n)
            vb = values[..., b * block_n:(b + 1) * block_n, :]
            live = visited[:, b]  # (lq,): the rows that visit this block
            if raw_exp:
                p = np.exp(s.astype(np.float32)).astype(np.float64)
                total = np.where(live, total + p.sum(-1), total)
                acc = np.where(live[:, None], acc + p @ vb, acc)
                continue
            if shift == "running":
                m_new = np.maximum(m, s.max(-1))
                ref = np.where(m_new == -np.inf, 0.0, m_new) if guard else m_new
                p = np.exp(s - ref[..., None])
                pv, ps = p @ vb, p.sum(-1)
            else:
                m_block = s.max(-1)
                ref_block = np.where(m_block == -np.inf, 0.0, m_block) if guard else m_block
                p = np.exp(s - ref_block[..., None])
                m_new = np.maximum(m, m_block)
                ref = np.where(m_new == -np.inf, 0.0, m_new) if guard else m_new
                beta = np.exp(ref_block - ref)
                pv, ps = beta[..., None] * (p @ vb), beta * p.sum(-1)
            alpha = np.exp(m - ref)
            new_total = (total * alpha if rescale_sum else total) + ps
            new_acc = (acc * alpha[..., None] if rescale_acc else acc) + pv
            if normalise in ("block", "both"):
                new_acc = new_acc / new_total[..., None]
            if acc_dtype is not None:
                new_acc = round_to_dtype(new_acc, acc_dtype)
            m = np.where(live, m_new, m)
            total = np.where(live, new_total, total)
            acc = np.where(live[:, None], new_acc, acc)
        out = acc if normalise in ("block", "never") else acc / total[..., None]
        if scale_form == "after":
            out = out / math.sqrt(d)
    return out


def _out_dtype(args) -> str:
    return getattr(args[0], "stored_dtype", "float64")


def _stored(x, args):
    return round_to_dtype(x, _out_dtype(args))


# ---------------------------------------------------------------------------------------------
# Replays. A Triton replay allows what a correct kernel's arithmetic adds on a GPU: tl.dot
# rounds float32 probabilities to TF32 (about 5e-4) and 16-bit kernels round p to the inputs'
# dtype before p @ v; the inputs themselves are exact.

_REPLAY_TOLERANCE = {"float64": (1e-12, 1e-9), "float32": (1e-3, 1e-3),
                     "float16": (3e-3, 3e-3), "bfloat16": (2e-2, 2e-2)}


class replay(same_as):  # noqa: N801 - used like a function, as same_as is
    """``same_as`` whose tolerance follows the case's dtype (a Python list is float64)."""

    def __call__(self, got, args, want) -> bool:
        from learning.grader.numbers import close

        atol, rtol = _REPLAY_TOLERANCE[_out_dtype(args)]
        buggy = self._buggy(args)
        if buggy is None or buggy.shape != got.shape or close(got, want, atol, rtol).all():
            return False
        return bool(close(got, buggy, atol, rtol).all())


class unnormalised(replay):  # noqa: N801 - used like a function, as replay is
    """``replay`` for an output never divided by the running sum l: each row of it is l times
    the right one, and so is the rounding a right kernel does on its way there (p rounded to
    TF32 or 16 bits before p @ v, the output stored), which is relative to the terms of acc,
    not to its sum. So both outputs are compared divided by the row's l, against the same
    tolerance as a normalised output. On an H200 the plain replay missed 2 of the 18 cases it
    fails by 9 % (head dim 128 in float32, a full launch in float16, l up to 155), which then
    ruled the bug out for every case (lab/results/unnormalised_gpu_before.txt; after the
    change, unnormalised_gpu.txt)."""

    def _per_row(self, got, args):
        import numpy as np

        q, k, v, causal = args[:4]
        ones = np.ones(np.shape(v)[:-1] + (1,))
        sums = simulate(q, k, ones, causal, block_n=max(np.shape(k)[-2], 1), normalise="never")
        sums = np.where(np.isfinite(sums) & (sums > 0), sums, 1.0)
        return got / sums, sums

    def __call__(self, got, args, want) -> bool:
        from learning.grader.numbers import close

        atol, rtol = _REPLAY_TOLERANCE[_out_dtype(args)]
        buggy = self._buggy(args)
        if buggy is None or buggy.shape != got.shape or close(got, want, atol, rtol).all():
            return False
        scaled, sums = self._per_row(got, args)
        return bool(close(scaled, buggy / sums, atol, rtol).all())

    def explains(self, got, args, want, atol: float, rtol: float) -> bool | None:
        from learning.grader.numbers import close

        buggy = self._buggy(args)
        if buggy is None or buggy.shape != want.shape or close(buggy, want, atol, rtol).all():
            return None
        if buggy.shape != got.shape:
            return False
        scaled, sums = self._per_row(got, args)
        atol, rtol = max(atol, self.atol), max(rtol, self.rtol)
        return bool(close(scaled, buggy / sums, atol, rtol).all())


def _variants(block_ms, **switches):
    """The replay of one mistake for every key block size, and for causal kernels that skip
    the blocks above the diagonal, every query block size too (``block_ms``)."""
    forms = []
    for block_n in TILES:
        forms.append(dict(switches, block_n=block_n))
        forms += [dict(switches, block_n=block_n, block_m=block_m, skip=True)
                  for block_m in block_ms]
    return forms


def _triton_replay(*switch_sets):
    """Evidence for a Triton mistake with one or more forms (keyword sets for simulate)."""
    def run(form):
        def reproduce(q, k, v, causal):
            if form.get("acc_dtype") == "input":  # the accumulator in q's own dtype
                return _stored(simulate(q, k, v, causal, **dict(form, acc_dtype=_out_dtype(
                    (q,)))), (q,))
            return _stored(simulate(q, k, v, causal, **form), (q,))

        return (unnormalised if form.get("normalise") == "never" else replay)(reproduce)

    return any_of(*(run(form) for switches in switch_sets
                    for form in _variants(TILES, **switches)))


def _python_replay(*switch_sets):
    """The same for the Python part: one query row at a time (a query block of 1), blocks of
    the case's own size, every block visited or only those up to the diagonal."""
    def run(switches, skip):
        def reproduce(q, k, v, causal, block):
            return simulate(q, k, v, causal, block_n=block, block_m=1, skip=skip, **switches)

        return replay(reproduce)

    return any_of(*(run(switches, skip) for switches in switch_sets for skip in (False, True)))


# hidden scores 0: every one, the causal ones only, the key tail only (with the causal mask
# on its own columns, or over the tail as well: the key-tail mask forgotten, the causal kept)
_ZERO_MASKS = ({"mask_value": 0.0, "pad_value": 0.0}, {"mask_value": 0.0},
               {"pad_value": 0.0}, {"pad_value": 0.0, "causal_hides_pad": True})
_NO_GUARD = ({"shift": "block", "guard": False}, {"order": "reverse", "guard": False})
_SCALES = ({"scale_form": "none"}, {"scale_form": "after"}, {"scale_form": "inverse"},
           {"scale_form": "d"})
_OFF_BY_ONE = ({"causal_shift": -1}, {"causal_shift": 1})
# query i sees keys j >= i, or j > i
_REVERSED = ({"causal_reversed": True}, {"causal_reversed": True, "causal_shift": 1})
_PER_BLOCK = ({"normalise": "block"}, {"normalise": "both"})


def _python_off_by_one(q, k, v, causal, block):
    """Query i sees keys j < i: row 0 sees none, and 0 / 0 raises in Python."""
    scale = 1 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(q):
        seen = [(scale * sum(a * b for a, b in zip(row, k[j])), v[j])
                for j in range(len(k)) if not causal or j < i]
        top = max((s for s, _ in seen), default=0.0)
        weights = [math.exp(s - top) for s, _ in seen]
        total = sum(weights)
        out.append([sum(w * vj[c] for w, (_, vj) in zip(weights, seen)) / total
                    for c in range(len(v[0]))])
    return out


def _python_unshifted(q, k, v, causal, block):
    """exp(score) with no maximum: math.exp raises past about 709."""
    scale = 1 / math.sqrt(len(q[0]))
    out = []
    for i, row in enumerate(q):
        weights = [math.exp(scale * sum(a * b for a, b in zip(row, k[j])))
                   if not causal or j <= i else 0.0 for j in range(len(k))]
        total = sum(weights)
        out.append([sum(w * v[j][c] for j, w in enumerate(weights)) / total
                    for c in range(len(v[0]))])
    return out


def _refusal_safe(reproduce):
    """A raising replay says nothing about the case that must raise ValueError: there it
    returns (a learner who refuses that case passed it, which rules no mistake out)."""
    def wrapped(q, k, v, causal, block):
        if causal and len(q) != len(k):
            return []
        return reproduce(q, k, v, causal, block)

    return wrapped


def _read_as_contiguous(x):
    """What a kernel that assumes contiguous (batch, heads, seq, d) strides reads of ``x``."""
    np = _np()
    storage = getattr(x, "storage", None)
    if storage is None:
        raise ValueError("no memory to replay")
    return np.asarray(storage)[:int(np.prod(np.shape(x)))].reshape(np.shape(x))


def _strides_assumed(q, k, v, causal, into_seq_heads: bool, assumed: str = "qkv"):
    """The inputs named in ``assumed`` read with contiguous strides, the others with their own;
    the output written with contiguous strides too, either into a contiguous tensor (right
    places) or into one of q's layout (torch.empty_like(q))."""
    np = _np()
    q, k, v = (_read_as_contiguous(x) if name in assumed else np.asarray(x)
               for name, x in zip("qkv", (q, k, v)))
    got = simulate(q, k, v, causal, block_n=max(np.shape(k)[-2], 1))
    if into_seq_heads:
        b, h, s, d = got.shape
        got = got.reshape(-1).reshape(b, s, h, d).transpose(0, 2, 1, 3)
    return _stored(got, (q,))


def _bugs(python: bool) -> tuple[Bug, ...]:
    evidence = _python_replay if python else _triton_replay
    hint = (lambda p, t: p) if python else (lambda p, t: t)
    return (
        Bug("masked-zero", "a hidden key's score is 0 instead of -inf (a key past seq_k, or "
            "one the causal mask hides): exp(0 - m) is not 0, so that key still takes part. "
            "Set hidden scores to -inf, tl.where(visible, s, -float('inf'))",
            evidence(*(_ZERO_MASKS[1:2] if python else _ZERO_MASKS)), hint=hint(2, 3)),
        Bug("acc-not-rescaled", "when a row's maximum grows, the accumulator still holds "
            "p @ v measured from the old maximum: multiply it by alpha = exp(m_old - m_new) "
            "before adding the new block's p @ v", evidence({"rescale_acc": False}),
            hint=hint(4, 4)),
        Bug("sum-not-rescaled", "when a row's maximum grows, the running sum l still holds "
            "exp(s - m_old) terms: multiply it by alpha = exp(m_old - m_new) before adding "
            "the new block's sum", evidence({"rescale_sum": False}), hint=hint(4, 4)),
        Bug("normalised-per-block", "the accumulator is divided by l inside the loop: the "
            "next block's alpha rescales a quotient, not the sum it needs. Keep acc and l "
            "unnormalised and divide once, after the last block", evidence(*_PER_BLOCK),
            hint=hint(4, 5)),
        Bug("not-normalised", "the output is the accumulator itself, never divided by the "
            "running sum l: a row's softmax weights must add up to 1, so end with acc / l, "
            "once, after the last block", evidence({"normalise": "never"}), hint=hint(4, 5)),
        Bug("causal-off-by-one", "the causal mask is off by one: query i sees keys j <= i, "
            "itself included (j < i leaves row 0 with no key at all)",
            evidence(*_OFF_BY_ONE) if not python else any_of(evidence(*_OFF_BY_ONE[1:])),
            raises=raises_like(_refusal_safe(_python_off_by_one)) if python else None,
            hint=hint(2, 3)),
        # (the replay hides no key; a mask built on the wrong axes, rows[None, :], hides
        # whole blocks but none inside the diagonal one, and gives the same numbers)
        Bug("causal-ignored", "keys past the diagonal took part: with causal set, query i "
            "sees only keys j <= i, and here keys j > i were not hidden, as if there were no "
            "causal mask. " + (
                "Give key j the score -math.inf where causal and j > i" if python else
                "With CAUSAL, the mask must compare each key's column with its own query's "
                "row, visible = visible & (cols[None, :] <= rows[:, None]), and the kernel be "
                "launched with CAUSAL=causal"),
            evidence({"causal_mask": False}), hint=hint(2, 3)),
        Bug("causal-reversed", "the causal mask is turned round: query i must see the keys "
            "at or before it (j <= i), but here it saw those at or after it. " + (
                "Give key j the score -math.inf where causal and j > i" if python else
                "Keep visible = visible & (cols[None, :] <= rows[:, None]): the key's column "
                "at most the query's row"),
            evidence(*_REVERSED), hint=hint(2, 3)),
        Bug("scale", "the scores are not softmax(q . k / sqrt(d)): multiply every score by "
            "1 / sqrt(d) (not 1 / d) before the maximum and the exponential (not the output "
            "after)",
            evidence(*_SCALES), hint=hint(1, 3)),
        Bug("no-guard", "a block whose keys are all hidden from a row was measured from a "
            "maximum of -inf (the block's own, or a running one that had seen only hidden "
            "keys), and exp((-inf) - (-inf)) = NaN: measure from 0 wherever that maximum is "
            "-inf (A1's guard), ref = where(m == -inf, 0, m)", evidence(*_NO_GUARD),
            hint=hint(3, 4)),
        Bug("no-shift", ("math.exp overflows past about 709" if python else
                         "exp overflows float32 just past 88.7") + ": every exponential must "
            "be measured from the running maximum, exp(s - m)",
            raises=raises_like(_refusal_safe(_python_unshifted)) if python else None,
            detect=None if python else _triton_replay({"raw_exp": True}), hint=hint(3, 4)),
    )


# ---------------------------------------------------------------------------------------------
# Lesson 13, part 1: attention_python(q, k, v, causal, block) for one head, on lists.

PYTHON_BUGS = _bugs(python=True) + (
    Bug("missing-error", "causal attention with seq_q != seq_k is ambiguous (which keys does "
        "query i see?): raise ValueError when causal and len(q) != len(k)", hint=1),
    Bug("wrong-length", "the output has one row per query, each of len(v[0]) numbers", hint=1),
    Bug("rounded", "the outputs are rounded: return the full-precision values", rounded_output),
)


def _lists(q, k, v, causal, block):
    return lambda: ([[float(x) for x in row] for row in q], [[float(x) for x in row] for row in k],
                    [[float(x) for x in row] for row in v], causal, block)


def _seeded(seed: int, lq: int, lk: int, d: int, causal: bool, block: int, *, shift=0.0,
            q_shift=None, rising=0.0, q_zero=False):
    """q, k, v of six-decimal values in [-1, 1]. ``shift`` moves every value of q and k (large
    scores), ``q_shift`` q's alone where given; ``rising`` sets q's first value near 1 and
    adds rising * j to key j's, so that the scores grow along the keys; ``q_zero`` makes every
    score 0."""
    def make():
        import random

        rng = random.Random(seed)

        def rows(n, offset=0.0):
            return [[round(rng.uniform(-1, 1) + offset, 6) for _ in range(d)] for _ in range(n)]

        q, k, v = rows(lq, shift if q_shift is None else q_shift), rows(lk, shift), rows(lk)
        if rising:
            for row in q:
                row[0] = round(1.0 + abs(row[0]), 6)
            for j, row in enumerate(k):
                row[0] = round(row[0] + rising * j, 6)
        if q_zero:
            q = [[0.0] * d for _ in range(lq)]
        return q, k, v, causal, block

    return make


WORKED_Q, WORKED_K, WORKED_V = worked_example.worked()
WORKED_BLOCK = worked_example.WORKED_BLOCK

PYTHON_CASES = (
    Case("worked example", "the lesson's 3 queries and 6 keys in blocks of 2: query 0's "
         "maximum grows in every block", _lists(WORKED_Q, WORKED_K, WORKED_V, False,
                                                WORKED_BLOCK),
         catches=("acc-not-rescaled", "sum-not-rescaled", "normalised-per-block", "scale",
                  "not-normalised")),
    Case("one key", "a single key in a block of 4: every query's output is that key's v",
         _seeded(1, 3, 1, 4, False, 4), catches=("scale",)),
    Case("causal first row", "causal, 5 queries and keys in blocks of 2: query 0 sees key 0 "
         "alone", _seeded(2, 5, 5, 4, True, 2),
         catches=("causal-off-by-one", "masked-zero", "causal-ignored", "causal-reversed")),
    Case("a key block entirely hidden", "causal, 7 keys in blocks of 2: for queries 0 to 5 "
         "the last block holds only hidden keys (-inf scores)", _seeded(3, 7, 7, 4, True, 2),
         catches=("no-guard", "masked-zero", "causal-off-by-one", "causal-ignored")),
    Case("rising scores", "12 keys in blocks of 3 whose scores grow along the row: the "
         "maximum grows in every block", _seeded(4, 3, 12, 4, False, 3, rising=1.0),
         catches=("acc-not-rescaled", "sum-not-rescaled", "normalised-per-block")),
    Case("large logits", "queries and keys near 40 in d = 4: scores near 3200, far past "
         "where math.exp overflows", _seeded(5, 3, 5, 4, False, 2, shift=40.0),
         catches=("no-shift",)),
    Case("scores far below 0", "q near -40 and k near 40 in d = 4: every score near -3200, "
         "where math.exp underflows to 0 unless it is measured from the row's own maximum "
         "(not from 0)", _seeded(10, 3, 5, 4, False, 2, shift=40.0, q_shift=-40.0), catches=()),
    Case("uniform scores", "q all 0: every score is 0 and the output is the mean of v's rows",
         _seeded(6, 2, 7, 4, False, 3, q_zero=True), catches=("normalised-per-block",)),
    Case("block of 1", "one key per block: the maximum can change at every key",
         _seeded(7, 3, 5, 4, False, 1, rising=0.5), catches=("acc-not-rescaled",)),
    Case("block larger than the keys", "5 keys in one block of 8: the loop runs once",
         _seeded(8, 3, 5, 4, False, 8), catches=("scale",)),
    Case("causal, seq_q != seq_k", "causal with 3 queries and 5 keys has no agreed meaning: "
         "it must raise ValueError", _seeded(9, 3, 5, 4, True, 2),
         catches=("missing-error",), raises="ValueError"),
)

# ---------------------------------------------------------------------------------------------
# Lesson 13, part 2: attention_triton(q, k, v, causal) on (batch, heads, seq, d) tensors.

FP32 = Tolerance(atol=1e-3, rtol=1e-3)  # float32 in, p rounded to TF32 by tl.dot on a GPU
FP16 = Tolerance(atol=2e-3, rtol=4e-3)  # float16 in, p rounded to float16, output too
BF16 = Tolerance(atol=2e-2, rtol=2e-2)  # bfloat16 keeps 8 bits: p and the output rounded

TRITON_BUGS = _bugs(python=False) + (
    Bug("acc-16-bit", "the accumulator is kept in the inputs' 16-bit dtype: it sums up to "
        "seq_k rows of v before the division, and float16 overflows past 65504. Keep acc in "
        "tl.float32 and convert once, at the store",
        _triton_replay({"acc_dtype": "input"}), hint=5),
    Bug("exp2-base", "the output is the softmax of the scores times ln 2 (0.693), which is "
        "what tl.exp2 gives where tl.exp was meant: exp2(x) is 2**x, not e**x. Use tl.exp, or "
        "multiply the scores by log2(e) = 1.4427 before the maximum and every exp2",
        _triton_replay({"scale_form": "exp2"}), hint=4),
    Bug("strides-assumed", "the kernel assumed contiguous (batch, heads, seq, d) tensors (all "
        "of q, k and v, or some of them): a (batch, seq, heads, d) tensor transposed has other "
        "strides. Pass q.stride(0), q.stride(1), q.stride(2) (and k's, v's and the "
        "output's) and use them",
        any_of(replay(partial(_strides_assumed, into_seq_heads=True)),
               *(replay(partial(_strides_assumed, into_seq_heads=False, assumed=names))
                 for names in ("qkv", "q", "k", "v", "kv"))), hint=2),
    Bug("missing-error", "causal attention with seq_q != seq_k is ambiguous (which keys does "
        "query i see?): raise ValueError when causal and q.shape[2] != k.shape[2]", hint=6),
    Bug("grid-too-small", "whole rows of the output were never written: no program stored "
        "them. Which query rows are stored is decided by the grid (triton.cdiv(seq_q, "
        "BLOCK_M) programs on axis 0, batch * heads on axis 1, each program finding batch = "
        "pid // n_heads and head = pid % n_heads), by each program's rows (pid_m * BLOCK_M + "
        "tl.arange(0, BLOCK_M)) and by the store's row mask (rows < seq_q): one of them stops "
        "short, or the store's offsets point elsewhere", hint=1),
    Bug("out-of-bounds", "a load or store reached outside the tensors; which part of the "
        "address was wrong, the check cannot tell. It comes from one of: a lane that should "
        "be masked and was not (query rows at or past seq_q in the load of q and the store, "
        "keys at or past seq_k in the loads of k and v); an offset for a head that does not "
        "exist (batch = pid // n_heads and head = pid % n_heads, on a grid of cdiv(seq_q, "
        "BLOCK_M) x batch * heads); or an address built with another tensor's strides, or "
        "into an output allocated with another shape"),  # one of several: no one hint
    Bug("wrong-dtype", "the output must have q's dtype: accumulate in float32, then store "
        "out.to(out_ptr.dtype.element_ty) into torch.empty(..., dtype=q.dtype)", hint=6),
)


def _eighths(rng, shape, low=-16, high=16):
    """Random multiples of 1/8 in [low / 8, high / 8): exact in float32, TF32 and float16."""
    return rng.integers(low, high, shape) / 8.0


def _heads(seed: int, batch: int, heads: int, lq: int, lk: int, d: int, causal: bool, *,
           dtype: str = "float32", layout: str = "contiguous", fill=None, layouts=None):
    """q (batch, heads, lq, d), k and v (batch, heads, lk, d) and causal; ``fill(rng, q, k,
    v)`` reshapes the values for a case's purpose; ``layouts`` gives q, k and v a layout
    each (``layout`` gives all three the same)."""
    def make():
        np = _np()
        rng = np.random.default_rng(seed)
        q = _eighths(rng, (batch, heads, lq, d))
        k = _eighths(rng, (batch, heads, lk, d))
        v = _eighths(rng, (batch, heads, lk, d), -8, 8)  # |v| <= 1: TF32's p errs by |v| / 2048
        if fill is not None:
            q, k, v = fill(rng, q, k, v)
        return (*(TensorSpec(x, dtype=dtype, layout=own, guard=math.nan)
                  for x, own in zip((q, k, v), layouts or (layout,) * 3)), causal)

    return make


def _negative_scores(rng, q, k, v):
    """q >= 1/8 and k <= -1/8 everywhere: every real score is below 0, so a 0 wins."""
    return abs(q) + 0.125, -abs(k) - 0.125, v


def _large(rng, q, k, v):
    """Values near 16 in d = 16: q . k near 4096, scores near 1024, a few units apart."""
    return 16.0 + rng.integers(-4, 5, q.shape) / 8.0, 16.0 + rng.integers(-4, 5, k.shape) / 8.0, v


def _rising(rng, q, k, v):
    """q's first value 2 and key j's first value j / 4: the scores rise by about 1/8 a key,
    so a row's maximum grows in every block of keys."""
    q, k = q / 4, k / 4
    q[..., 0] = 2.0
    k[..., 0] = (_np().arange(k.shape[-2]) / 4.0)[None, None, :]
    return q, k, v


def _rows_apart(rng, q, k, v):
    """k near 16 and q near +16 in even rows, -16 in odd ones: scores near +1024 and -1024.
    Each row must be measured from its own maximum; from another row's, exp overflows or
    underflows the whole row."""
    sign = _np().where(_np().arange(q.shape[-2]) % 2 == 0, 1.0, -1.0)[None, None, :, None]
    return (sign * (16.0 + rng.integers(-4, 5, q.shape) / 8.0),
            16.0 + rng.integers(-4, 5, k.shape) / 8.0, v)


def _uniform(rng, q, k, v):
    return 0.0 * q, k, v


def _big_values(rng, q, k, v):
    """q = 0 (every key weighs 1) and v in [800, 1000]: the accumulator sums 80 rows of v,
    about 72,000, past float16's 65,504, while the output (their mean) is near 900."""
    return 0.0 * q, k, rng.integers(800, 1001, v.shape).astype(float)


def _normal(rng, q, k, v):
    return (rng.standard_normal(q.shape), rng.standard_normal(k.shape),
            rng.standard_normal(v.shape))


TRITON_CASES = (
    Case("one key", "seq_k = 1: a block of keys that is all padding but one; every output "
         "row is that key's v", _heads(1, 1, 1, 5, 1, 16, False),
         catches=("masked-zero", "out-of-bounds")),
    Case("key tail padded", "20 keys, every real score below 0: the padding past seq_k must "
         "score -inf, since a 0 would outweigh every key", _heads(2, 1, 1, 8, 20, 16, False,
                                                                   fill=_negative_scores),
         catches=("masked-zero", "out-of-bounds")),
    Case("lengths off the blocks", "20 queries and 25 keys: neither a multiple of any block, "
         "so the last query block and the last key block are both cut",
         _heads(3, 1, 1, 20, 25, 16, False), catches=("out-of-bounds", "scale")),
    Case("causal first row", "causal, 8 queries and keys: query 0 sees key 0 alone, so its "
         "output is v[0]", _heads(4, 1, 1, 8, 8, 16, True),
         catches=("causal-off-by-one", "masked-zero", "causal-ignored", "causal-reversed")),
    Case("a key block entirely hidden", "causal, 40 queries and keys: in blocks of 16 or 32, "
         "the first queries meet later key blocks whose keys are all hidden (-inf)",
         _heads(5, 1, 1, 40, 40, 16, True),
         catches=("no-guard", "masked-zero", "causal-off-by-one", "normalised-per-block",
                  "causal-ignored")),
    Case("large logits", "q . k near 4096 in d = 16: scores near 1024, where exp overflows "
         "float32 unless it is measured from the maximum", _heads(6, 1, 1, 16, 40, 16, False,
                                                                  fill=_large),
         catches=("no-shift", "scale")),
    Case("rows far apart", "q . k near +4096 for even queries and -4096 for odd ones (d = "
         "16): each query's scores must be measured from its own maximum, taken along the "
         "keys", _heads(19, 1, 1, 16, 24, 16, False, fill=_rows_apart), catches=()),
    Case("rising scores", "scores that grow along the keys: a row's maximum grows in every "
         "block, and everything measured from the old one must be rescaled",
         _heads(7, 1, 1, 16, 48, 16, False, fill=_rising),
         catches=("acc-not-rescaled", "sum-not-rescaled", "normalised-per-block",
                  "not-normalised")),
    Case("uniform scores", "q all 0: every score is 0 and the output is the mean of v's rows "
         "(30 keys: the padding must not count)", _heads(8, 1, 1, 10, 30, 16, False,
                                                         fill=_uniform),
         catches=("masked-zero", "normalised-per-block")),
    Case("head dim 16", "d = 16, the smallest K tl.dot(q, k^T) takes on a GPU with 16-bit "
         "inputs: one block of queries against one block of keys",
         _heads(9, 1, 1, 16, 16, 16, False),
         catches=("scale", "exp2-base")),
    Case("head dim 128", "d = 128: the scale is 1 / sqrt(128), and q stays one (BLOCK_M, 128) "
         "block in the program", _heads(10, 1, 1, 16, 20, 128, False, fill=_rising),
         catches=("scale",)),
    Case("batch x heads", "causal, 2 batches of 3 heads: program_id(1) runs over batch * "
         "heads, and each program must find its own: batch = pid // heads, head = pid % heads "
         "(with as many batches as heads, swapping the two goes unseen)",
         _heads(11, 2, 3, 12, 12, 16, True), catches=("grid-too-small", "causal-ignored")),
    Case("(batch, seq, heads, d) transposed", "q, k and v as models hold them: a (2, 12, 2, "
         "16) tensor transposed to (2, 2, 12, 16), strides (384, 16, 32, 1)",
         _heads(12, 2, 2, 12, 12, 16, False, layout="seq-heads"),
         catches=("strides-assumed",)),
    Case("k and v laid out apart", "2 batches of 2 heads, 10 queries and 14 keys, v transposed "
         "from (batch, seq, heads, d): each tensor's offsets need its own strides (k's heads "
         "start 14 rows apart, q's 10; v's rows are 32 elements apart, k's 16)",
         _heads(21, 2, 2, 10, 14, 16, False,
                layouts=("contiguous", "contiguous", "seq-heads")), catches=()),
    Case("k laid out apart from q", "2 batches of 2 heads, 10 queries and 14 keys, k transposed "
         "from (batch, seq, heads, d): k's rows are 32 elements apart, q's and v's 16, so k's "
         "offsets read with q's (or v's) row stride land on the wrong keys",
         _heads(22, 2, 2, 10, 14, 16, False,
                layouts=("contiguous", "seq-heads", "contiguous")), catches=()),
    Case("float16", "float16 q, k and v: the scores and the sums in float32, the output "
         "rounded once to float16", _heads(13, 1, 1, 20, 30, 16, False, dtype="float16",
                                           fill=_normal),
         catches=("wrong-dtype",), tolerance=FP16),
    Case("float16 accumulator", "float16, q = 0 and v near 900: the accumulator sums 80 rows "
         "of v (about 72,000, past float16's 65,504) before the division",
         _heads(14, 1, 1, 4, 80, 16, False, dtype="float16", fill=_big_values),
         catches=("acc-16-bit",), tolerance=FP16),
    Case("inputs unchanged", "q, k and v must be the same after the call: scaling q in place "
         "changes the caller's tensor", _heads(15, 1, 1, 8, 8, 16, False),
         catches=("mutated-input",)),
    Case("causal, seq_q != seq_k", "causal with 8 queries and 12 keys has no agreed meaning: "
         "it must raise ValueError", _heads(16, 1, 1, 8, 12, 16, True),
         catches=("missing-error",), raises="ValueError"),
    Case("bfloat16", "bfloat16 q, k and v, causal (GPU only: the interpreter mishandles "
         "bfloat16)", _heads(17, 2, 3, 100, 100, 64, True, dtype="bfloat16", fill=_normal),
         catches=("wrong-dtype",), tolerance=BF16, gpu_only=True),
    Case("a full launch on the GPU", "2 batches of 4 heads, 1000 queries and keys, d = 64, "
         "causal, float16: hundreds of programs (GPU only, too slow to interpret)",
         _heads(18, 2, 4, 1000, 1000, 64, True, dtype="float16", fill=_normal),
         catches=(), tolerance=FP16, gpu_only=True, replays=False),
)

PYTHON_HINTS = (
    "Start with the checks and the scale: raise ValueError if causal and len(q) != len(k); "
    "scale = 1 / math.sqrt(len(q[0])). Then one query row at a time: for i, row in "
    "enumerate(q).",
    "For each row, m = -math.inf, l = 0.0, acc = [0.0] * d; for start in range(0, len(k), "
    "block): the scores of keys start .. start + block - 1 are scale * (row . k[j]), or "
    "-math.inf where causal and j > i.",
    "m_new = max(m, max(scores)); ref = m_new if m_new != -math.inf else 0.0; alpha = "
    "math.exp(m - ref); p = [math.exp(s - ref) for s in scores].",
    "l = l * alpha + sum(p); acc[c] = acc[c] * alpha + sum of p[j] * v[start + j][c]; m = "
    "m_new. After the last block, the row's output is [a / l for a in acc].",
)

TRITON_HINTS = (
    "Launch grid = (triton.cdiv(seq_q, BLOCK_M), batch * heads); in the kernel pid_m = "
    "tl.program_id(0), and batch = tl.program_id(1) // n_heads, head = tl.program_id(1) % "
    "n_heads.",
    "Move each pointer to its head first: q_ptr += batch * stride_qb + head * stride_qh (the "
    "same for k, v and out). rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M), dims = "
    "tl.arange(0, HEAD_DIM); q = tl.load(q_ptr + rows[:, None] * stride_qm + dims[None, :], "
    "mask=rows[:, None] < seq_q, other=0.0).",
    "for start in range(0, seq_k, BLOCK_N): cols = start + tl.arange(0, BLOCK_N); load k and v "
    "with mask=cols[:, None] < seq_k; s = tl.dot(q, tl.trans(k)) * scale; s = "
    "tl.where(visible, s, -float('inf')) with visible = cols[None, :] < seq_k, and with CAUSAL "
    "also cols[None, :] <= rows[:, None].",
    "m_new = tl.maximum(m, tl.max(s, axis=1)); ref = tl.where(m_new == -float('inf'), 0.0, "
    "m_new); alpha = tl.exp(m - ref); p = tl.exp(s - ref[:, None]); l = l * alpha + "
    "tl.sum(p, axis=1); acc = acc * alpha[:, None] + tl.dot(p.to(v.dtype), v); m = m_new.",
    "Before the loop: m = tl.full((BLOCK_M,), -float('inf'), tl.float32), l = "
    "tl.zeros((BLOCK_M,), tl.float32), acc = tl.zeros((BLOCK_M, HEAD_DIM), tl.float32). After "
    "it: store (acc / l[:, None]).to(out_ptr.dtype.element_ty) with mask=rows[:, None] < seq_q.",
    "In attention_triton: raise ValueError if causal and q.shape[2] != k.shape[2]; out = "
    "torch.empty((batch, heads, seq_q, d), dtype=q.dtype, device=q.device); pass out's, q's, "
    "k's and v's first three strides, n_heads, seq_q, seq_k, 1 / math.sqrt(d), CAUSAL=causal, "
    "HEAD_DIM=d, BLOCK_M=16, BLOCK_N=16; return out.",
)

def _in_key_block(loops: dict, args: tuple) -> str:
    """Where the reference was: "for query row 0, keys 2 to 3" (the row alone before its
    first block of keys)."""
    if "i" not in loops:
        return ""
    place = f"for query row {loops['i']}"
    if "start" in loops:
        first, last = loops["start"], min(loops["start"] + args[4], len(args[1])) - 1
        place += f", key {first}" if first == last else f", keys {first} to {last}"
    return place


# The running m, l and acc of each query row, and each step of their update by a block of keys.
PYTHON_STEPS = Steps(("m", "l", "acc", "scores", "m_new", "ref", "alpha", "p"), _in_key_block,
                     feeds={"scores": ("m_new", "p")})

def _in_program(loops: dict, args: tuple) -> str:
    """Where the reference kernel was: "in program (1, 0), keys 16 to 24"."""
    if "program" not in loops:
        return ""
    x, y = loops["program"][:2]
    place = f"in program ({x}, {y})"
    if "start" in loops:
        # 16: the reference's BLOCK_N (another tiling is never compared)
        first, last = loops["start"], min(loops["start"] + 16, args[1].shape[-2]) - 1
        place += f", key {first}" if first == last else f", keys {first} to {last}"
    return place


# The kernel's query rows and q block, running m, l and acc, and each step of their update by
# a block of keys (its columns first: a block of other keys is told apart before its values).
TRITON_STEPS = Steps(("rows", "q", "m", "l", "acc", "cols", "s", "m_new", "ref", "alpha", "p",
                      "out"), _in_program, function="attention_kernel",
                     # the masked scores may be kept under another name than the raw ones
                     feeds={"s": ("m_new", "p")})

EXERCISE = Exercise(
    name="attention",
    title="FlashAttention forward: softmax over blocks of keys, then one kernel",
    lessons=("13-attention.md",),
    parts=(
        Part("python", "attention_python: one head, blocks of keys, a running (max, sum, acc)",
             lesson="13", function="attention_python", reference=reference,
             cases=PYTHON_CASES, tolerance=Tolerance(atol=1e-12, rtol=1e-9),
             bugs=PYTHON_BUGS, returns="list", hints=PYTHON_HINTS, steps=PYTHON_STEPS,
             plain_python=True),
        Part("triton", "attention_triton: one program per block of queries of one head",
             lesson="13", function="attention_triton", reference=reference,
             cases=TRITON_CASES, tolerance=FP32, bugs=TRITON_BUGS, returns="tensor",
             needs_kernels=True,
             kernel_ops=(("dot", "exp"), ("mul", "add", "exp")),
             torch_answers=("scaled_dot_product_attention", "softmax", "_softmax", "matmul",
                            "mm", "bmm", "baddbmm", "einsum"),
             hints=TRITON_HINTS, steps=TRITON_STEPS),
    ),
)
