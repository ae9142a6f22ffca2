"""The traffic exercise (lesson 02): count the bytes a sequence of kernels moves, its arithmetic
intensity, and which roof of the roofline limits it. The counting model itself lives in
``learning.exercises.traffic.explainer``, which the explain page and this grader share.

A kernel is plain data: ``{"name": str, "reads": [array names], "writes": [array names],
"flops": int}``. ``arrays`` maps each array name to its number of elements. Every kernel reads
each array in ``reads`` from global memory in full and writes each array in ``writes`` in full,
so an array used by two kernels is moved twice: that is logical traffic, the model of lesson 02.
"""

from __future__ import annotations

from learning.exercises.traffic.explainer import (  # the counting model, shared with the explainer
    COMPUTE_BOUND,
    EXAMPLE_BANDWIDTH,
    EXAMPLE_PEAK_FLOPS,
    KEYS,
    MEMORY_BOUND,
    bytes_moved,
    eager_softmax,
    fused_softmax,
    kernel,
    kernel_bytes,
    report,
    softmax_arrays,
    total_flops,
)
from learning.grader.declarations import Bug, Case, Exercise, Part, Tolerance

# ---------------------------------------------------------------------------------------------
# Known bugs. Each detect looks at one field of the returned dict and recognises the value a
# known mistake produces; the bytes mistakes are named only when exactly one of them fits.


def _fields(got) -> dict | None:
    return got if isinstance(got, dict) and set(got) == set(KEYS) else None


def _wrong_byte_counts(kernels, arrays, element_bytes) -> dict:
    """What each known counting mistake returns as "bytes"."""
    n = bytes_moved(kernels, arrays, element_bytes)
    reads = sum(kernel_bytes(k, arrays, element_bytes)[0] for k in kernels)
    unique = {name for k in kernels for name in k["reads"] + k["writes"]}
    per_kernel_sets = sum(arrays[name] for k in kernels for name in set(k["reads"] + k["writes"]))
    return {
        "counted-once": sum(arrays[name] for name in unique) * element_bytes,
        "in-place-once": per_kernel_sets * element_bytes,
        "reads-only": reads,
        "writes-only": n - reads,
        "elements-not-bytes": n // element_bytes,
        "megabytes": {n / 1e6, n / 2**20},
    }


class _bytes_bug:  # noqa: N801 - used like a function: Bug(..., _bytes_bug("reads-only"))
    """Recognises the "bytes" one counting mistake gives; where two mistakes give the same
    number for a case (counting each array once, or once per kernel, for one in-place kernel),
    each of them is named, unless the learner's other cases rule it out."""

    def __init__(self, key: str):
        self.key = key

    def _candidate(self, args):
        return _wrong_byte_counts(*args[:3])[self.key]

    def __call__(self, got, args, want) -> bool:
        fields = _fields(got)
        if fields is None or fields["bytes"] == want["bytes"]:
            return False
        candidate, value = self._candidate(args), fields["bytes"]
        same = value in candidate if isinstance(candidate, set) else value == candidate
        return same and candidate != want["bytes"]

    def predicts_failure(self, args, want, atol: float, rtol: float) -> bool:
        candidate = self._candidate(args)
        return want["bytes"] not in candidate if isinstance(candidate, set) else \
            candidate != want["bytes"]


def _intensity_bug(reproduce):
    def detect(got, args, want) -> bool:
        fields = _fields(got)
        if fields is None or fields["intensity"] == want["intensity"]:
            return False
        try:
            candidates = reproduce(args[0], args[1], args[2])
        except (ArithmeticError, ValueError):
            return False
        return any(fields["intensity"] == c and c != want["intensity"] for c in candidates)

    return detect


def _inverted(kernels, arrays, element_bytes):
    return [bytes_moved(kernels, arrays, element_bytes) / total_flops(kernels)]


def _integer_division(kernels, arrays, element_bytes):
    return [total_flops(kernels) // bytes_moved(kernels, arrays, element_bytes)]


def _per_kernel(kernels, arrays, element_bytes):
    each = [k["flops"] / sum(kernel_bytes(k, arrays, element_bytes)) for k in kernels]
    return [sum(each) / len(each), sum(each), max(each), min(each)]


def _last_digits(got, args, want) -> bool:
    fields = _fields(got)
    if fields is None or not isinstance(fields["intensity"], float):
        return False
    g, w = fields["intensity"], want["intensity"]
    return g != w and abs(g - w) <= 1e-12 * abs(w)


def _bound_bug(got, args, want) -> bool:
    fields = _fields(got)
    if fields is None:
        return False
    others_right = all(fields[k] == want[k] for k in ("bytes", "flops", "intensity"))
    return others_right and fields["bound"] in (MEMORY_BOUND, COMPUTE_BOUND) \
        and fields["bound"] != want["bound"]


def _bound_word(got, args, want) -> bool:
    fields = _fields(got)
    return fields is not None and fields["bound"] not in (MEMORY_BOUND, COMPUTE_BOUND)


def _not_a_record(got, args, want) -> bool:
    return _fields(got) is None


def _flops_bug(got, args, want) -> bool:
    fields = _fields(got)
    return fields is not None and fields["flops"] != want["flops"]


BUGS = (
    Bug("not-a-record", "return a dict with exactly the keys 'bytes', 'flops', 'intensity' and "
        "'bound'", _not_a_record),
    Bug("counted-once", "each array was counted once for the whole sequence: count per kernel, "
        "since an array that two kernels read crosses the memory bus twice",
        _bytes_bug("counted-once")),
    Bug("in-place-once", "a kernel that reads and writes the same array moves it twice, once in "
        "and once out: count its reads and its writes separately", _bytes_bug("in-place-once")),
    Bug("reads-only", "only the reads were counted: every array a kernel writes goes back to "
        "memory too", _bytes_bug("reads-only")),
    Bug("writes-only", "only the writes were counted: every array a kernel reads comes from "
        "memory too", _bytes_bug("writes-only")),
    Bug("elements-not-bytes", "that is a count of elements: multiply by element_bytes (4 for "
        "float32, 2 for float16)", _bytes_bug("elements-not-bytes")),
    Bug("megabytes", "'bytes' must be a whole number of bytes, not megabytes or MiB: convert "
        "only when you print", _bytes_bug("megabytes")),
    Bug("flops", "'flops' is the sum of every kernel's 'flops'", _flops_bug),
    Bug("intensity-inverted", "intensity is FLOPs per byte, flops / bytes, not bytes per FLOP",
        _intensity_bug(_inverted)),
    Bug("intensity-integer", "flops // bytes rounds down, to 0 for most memory-bound work: use "
        "the true division flops / bytes", _intensity_bug(_integer_division)),
    Bug("intensity-per-kernel", "the intensity of a sequence is its total FLOPs over its total "
        "bytes, not an average (or sum, or maximum) of each kernel's intensity",
        _intensity_bug(_per_kernel)),
    Bug("intensity-digits", "the intensity differs only in its last digits: compute it as one "
        "division of the two exact totals, flops / bytes", _last_digits),
    Bug("bound-word", "'bound' must be exactly 'memory-bound' or 'compute-bound'", _bound_word),
    Bug("wrong-bound", "memory-bound when the intensity is below the ridge point, peak_flops / "
        "bandwidth (FLOPs per byte), compute-bound at or above it", _bound_bug),
)


def _case(kernels_of, arrays_of, element_bytes=4, peak=EXAMPLE_PEAK_FLOPS,
          bandwidth=EXAMPLE_BANDWIDTH):
    """A case's arguments, built fresh on each call: (kernels, arrays, element_bytes, peak,
    bandwidth)."""

    def make():
        return (kernels_of(), arrays_of(), element_bytes, peak, bandwidth)

    return make


def _copy():
    return [kernel("copy", ["x"], ["y"], 0)]


def _copy_one_flop_per_byte():
    return [kernel("copy and scale", ["x"], ["y"], 8 * (1 << 20))]


def _in_place():
    return [kernel("add one in place", ["x"], ["x"], 1 << 20)]


def _chain():
    """y = relu(x), then z = 2 * y + b: the intermediate y is written, then read back."""
    return [kernel("relu", ["x"], ["y"], 1000 * 3000),
            kernel("scale and add bias", ["y", "b"], ["z"], 2 * 1000 * 3000)]


def _matmul(n: int):
    return lambda: [kernel("matmul", ["A", "B"], ["C"], 2 * n ** 3)]


def _square(name: str, n: int):
    return lambda: {name: n * n}


CASES = (
    Case("copy", "one read and one write of 2**20 float32 values, no arithmetic: intensity 0",
         _case(_copy, lambda: {"x": 1 << 20, "y": 1 << 20}),
         catches=("reads-only", "writes-only", "elements-not-bytes", "megabytes")),
    Case("fused softmax, 1024×1024", "one kernel, the least any softmax can move: x read once "
         "and y written once, 8 MiB",
         _case(lambda: fused_softmax(1024, 1024), lambda: softmax_arrays(1024, 1024)),
         catches=("reads-only", "intensity-inverted", "intensity-digits")),
    Case("eager softmax, 4096×4096", "five kernels: x and e are read twice each, and every "
         "intermediate (s, e, the per-row m and d) is written and read back",
         _case(lambda: eager_softmax(4096, 4096), lambda: softmax_arrays(4096, 4096)),
         catches=("counted-once", "flops", "intensity-per-kernel")),
    Case("in-place update", "x += 1 reads x and writes it back: two trips for one array",
         _case(_in_place, lambda: {"x": 1 << 20}), catches=("in-place-once",)),
    Case("two chained kernels", "relu, then a scale and a bias: the intermediate and a small "
         "bias vector, in float16", _case(_chain, lambda: {"x": 3_000_000, "y": 3_000_000,
                                                          "b": 3000, "z": 3_000_000},
                                          element_bytes=2),
         catches=("counted-once", "elements-not-bytes", "intensity-integer")),
    Case("matrix multiply", "C = A @ B for 4096×4096 float32: 2·n³ FLOPs on 3·n² values is "
         "far above the ridge point", _case(_matmul(4096), lambda: {
             "A": 4096 ** 2, "B": 4096 ** 2, "C": 4096 ** 2}),
         catches=("wrong-bound",)),
    Case("small matrix multiply", "C = A @ B for 16×16: too little reuse to leave the memory "
         "roof", _case(_matmul(16), lambda: {"A": 256, "B": 256, "C": 256}),
         catches=("wrong-bound",)),
    Case("another machine", "eager softmax on a device with a ridge point of 0.1 FLOP/byte: "
         "compute-bound there", _case(lambda: eager_softmax(256, 1000),
                                      lambda: softmax_arrays(256, 1000), peak=1e11,
                                      bandwidth=1e12),
         catches=("wrong-bound",)),
    Case("at the ridge point", "a copy that does one FLOP per byte on a device whose ridge "
         "point is 1 FLOP/byte: at the ridge, both roofs allow the same speed, and the "
         "lesson's rule calls it compute-bound", _case(_copy_one_flop_per_byte, lambda: {
             "x": 1 << 20, "y": 1 << 20}, peak=1e12, bandwidth=1e12),
         catches=("wrong-bound",)),
)

HINTS = (
    "Loop over the kernels; for each one, loop over its \"reads\" and then its \"writes\". "
    "Every name you meet adds arrays[name] * element_bytes: do not gather the names in a set.",
    "total_flops is sum(k[\"flops\"] for k in kernels); the intensity is flops / nbytes with "
    "a true division, on the two totals.",
    "The ridge point is peak_flops / bandwidth: below it \"memory-bound\", at or above it "
    "\"compute-bound\".",
    "roofline returns {\"bytes\": nbytes, \"flops\": flops, \"intensity\": flops / nbytes, "
    "\"bound\": bound(flops / nbytes, peak_flops, bandwidth)}.",
)

EXERCISE = Exercise(
    name="traffic",
    title="Memory traffic: bytes, intensity, the roofline",
    lessons=("02-traffic.md",),
    parts=(
        Part("python", "roofline: bytes, FLOPs, intensity and bound of a kernel sequence",
             lesson="02", function="roofline", reference=report, cases=CASES,
             tolerance=Tolerance(atol=0.0, rtol=0.0), bugs=BUGS, returns="exact",
             hints=HINTS, plain_python=True),
    ),
)
