"""Memory traffic: the bytes a sequence of kernels moves, its arithmetic intensity, and which roof
of the roofline limits it (lesson 02).

This is your file: edit it, then grade it with

    python -m learning.check traffic

Each function raises NotImplementedError until you write it, so the check can tell "not started"
from "wrong". Keep the names and signatures: the check calls ``roofline``, which uses the others.
"""

# A kernel is a dict: {"name": "exp", "reads": ["s"], "writes": ["e"], "flops": 16777216}.
# ``arrays`` maps every array name to its number of elements, e.g. {"s": 16777216, ...}.


def bytes_moved(kernels: list[dict], arrays: dict[str, int], element_bytes: int) -> int:
    """Bytes the kernels move through global memory, counted kernel by kernel (lesson 02).

    Every kernel reads each array named in its "reads" in full and writes each array named in
    its "writes" in full; nothing stays on chip between two kernels. So an array that two
    kernels read counts twice, and a kernel that updates an array in place counts it twice.
    Returns a whole number of bytes (an int).
    """
    # TODO(lesson 02): loop over the kernels, add up the bytes of their reads and writes.
    raise NotImplementedError("bytes_moved is not written yet: lesson 02 starts it")


def total_flops(kernels: list[dict]) -> int:
    """The arithmetic of the whole sequence: the sum of every kernel's FLOPs (lesson 02)."""
    # TODO(lesson 02)
    raise NotImplementedError("total_flops is not written yet: lesson 02 starts it")


def arithmetic_intensity(flops: int, nbytes: int) -> float:
    """FLOPs per byte moved: one true division of the two totals (lesson 02)."""
    # TODO(lesson 02)
    raise NotImplementedError("arithmetic_intensity is not written yet: lesson 02 starts it")


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """'memory-bound' below the ridge point peak_flops / bandwidth, else 'compute-bound'.

    ``peak_flops`` is in FLOP/s and ``bandwidth`` in bytes/s, so the ridge point is in FLOPs per
    byte, like the intensity.
    """
    # TODO(lesson 02)
    raise NotImplementedError("bound is not written yet: lesson 02 starts it")


def roofline(kernels: list[dict], arrays: dict[str, int], element_bytes: int,
             peak_flops: float, bandwidth: float) -> dict:
    """Where a sequence of kernels sits on the roofline (lesson 02).

    Returns a dict with exactly four keys: "bytes" (int), "flops" (int), "intensity" (float,
    flops / bytes) and "bound" ("memory-bound" or "compute-bound").
    """
    # TODO(lesson 02): put the four functions above together.
    raise NotImplementedError("roofline is not written yet: lesson 02 starts it")
