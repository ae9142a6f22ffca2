"""Memory traffic: the bytes a sequence of kernels moves, its arithmetic intensity, and which roof
of the roofline limits it (lesson 02).

Reference solution for traffic.py.
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
    total = 0
    for kernel in kernels:
        for name in kernel["reads"]:  # each input comes in from memory, in full
            total += arrays[name] * element_bytes
        for name in kernel["writes"]:  # each output goes back to memory, in full
            total += arrays[name] * element_bytes
    return total


def total_flops(kernels: list[dict]) -> int:
    """The arithmetic of the whole sequence: the sum of every kernel's FLOPs (lesson 02)."""
    return sum(kernel["flops"] for kernel in kernels)


def arithmetic_intensity(flops: int, nbytes: int) -> float:
    """FLOPs per byte moved: one true division of the two totals (lesson 02)."""
    return flops / nbytes


def bound(intensity: float, peak_flops: float, bandwidth: float) -> str:
    """'memory-bound' below the ridge point peak_flops / bandwidth, else 'compute-bound'.

    ``peak_flops`` is in FLOP/s and ``bandwidth`` in bytes/s, so the ridge point is in FLOPs per
    byte, like the intensity.
    """
    ridge = peak_flops / bandwidth  # FLOPs per byte at which both roofs meet
    return "memory-bound" if intensity < ridge else "compute-bound"


def roofline(kernels: list[dict], arrays: dict[str, int], element_bytes: int,
             peak_flops: float, bandwidth: float) -> dict:
    """Where a sequence of kernels sits on the roofline (lesson 02).

    Returns a dict with exactly four keys: "bytes" (int), "flops" (int), "intensity" (float,
    flops / bytes) and "bound" ("memory-bound" or "compute-bound").
    """
    nbytes = bytes_moved(kernels, arrays, element_bytes)
    flops = total_flops(kernels)
    intensity = arithmetic_intensity(flops, nbytes)
    return {"bytes": nbytes, "flops": flops, "intensity": intensity,
            "bound": bound(intensity, peak_flops, bandwidth)}
