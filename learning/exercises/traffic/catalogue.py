"""Other traffic counters: the mistakes lesson 02 warns about, and correct ones in other styles."""

from learning.grader.catalogue import Version

WRONG = (
    Version("each array counted once", "python", "counted-once", '''
        def bytes_moved(kernels, arrays, element_bytes):
            names = set()
            for kernel in kernels:
                names.update(kernel["reads"])
                names.update(kernel["writes"])
            return sum(arrays[name] for name in names) * element_bytes
    '''),
    Version("in-place array counted once", "python", "in-place-once", '''
        def bytes_moved(kernels, arrays, element_bytes):
            total = 0
            for kernel in kernels:
                touched = set(kernel["reads"]) | set(kernel["writes"])
                total += sum(arrays[name] for name in touched) * element_bytes
            return total
    '''),
    Version("reads only", "python", "reads-only", '''
        def bytes_moved(kernels, arrays, element_bytes):
            return sum(arrays[name] * element_bytes for k in kernels for name in k["reads"])
    '''),
    Version("writes only", "python", "writes-only", '''
        def bytes_moved(kernels, arrays, element_bytes):
            return sum(arrays[name] * element_bytes for k in kernels for name in k["writes"])
    '''),
    Version("elements, not bytes", "python", "elements-not-bytes", '''
        def bytes_moved(kernels, arrays, element_bytes):
            return sum(arrays[name] for k in kernels for name in k["reads"] + k["writes"])
    '''),
    Version("megabytes", "python", "megabytes", '''
        def bytes_moved(kernels, arrays, element_bytes):
            total = sum(arrays[name] for k in kernels for name in k["reads"] + k["writes"])
            return total * element_bytes / 1e6
    '''),
    Version("bytes as a float", "python", "float-for-int", '''
        def bytes_moved(kernels, arrays, element_bytes):
            total = sum(arrays[name] for k in kernels for name in k["reads"] + k["writes"])
            return total * element_bytes * 1.0
    '''),
    Version("FLOPs of the first kernel only", "python", "flops", '''
        def total_flops(kernels):
            return kernels[0]["flops"]
    '''),
    Version("bytes per FLOP", "python", "intensity-inverted", '''
        def arithmetic_intensity(flops, nbytes):
            return nbytes / flops if flops else 0.0
    '''),
    Version("floor division", "python", "intensity-integer", '''
        def arithmetic_intensity(flops, nbytes):
            return flops // nbytes
    '''),
    Version("average of the kernels' intensities", "python", "intensity-per-kernel", '''
        def roofline(kernels, arrays, element_bytes, peak_flops, bandwidth):
            each = [k["flops"] / bytes_moved([k], arrays, element_bytes) for k in kernels]
            intensity = sum(each) / len(each)
            return {"bytes": bytes_moved(kernels, arrays, element_bytes),
                    "flops": total_flops(kernels), "intensity": intensity,
                    "bound": bound(intensity, peak_flops, bandwidth)}
    '''),
    Version("intensity through megabytes", "python", "intensity-digits", '''
        def arithmetic_intensity(flops, nbytes):
            megaflops = flops / 1e6
            megabytes = nbytes / 1e6
            return megaflops / megabytes
    '''),
    Version("comparison the wrong way round", "python", "wrong-bound", '''
        def bound(intensity, peak_flops, bandwidth):
            return "compute-bound" if intensity < peak_flops / bandwidth else "memory-bound"
    '''),
    Version("ridge point upside down", "python", "wrong-bound", '''
        def bound(intensity, peak_flops, bandwidth):
            return "memory-bound" if intensity < bandwidth / peak_flops else "compute-bound"
    '''),
    Version("memory-bound at the ridge point too", "python", "wrong-bound", '''
        def bound(intensity, peak_flops, bandwidth):
            return "memory-bound" if intensity <= peak_flops / bandwidth else "compute-bound"
    '''),
    Version("intensity compared with the peak", "python", "wrong-bound", '''
        def bound(intensity, peak_flops, bandwidth):
            return "memory-bound" if intensity < peak_flops else "compute-bound"
    '''),
    Version("another word for the bound", "python", "bound-word", '''
        def bound(intensity, peak_flops, bandwidth):
            return "memory" if intensity < peak_flops / bandwidth else "compute"
    '''),
    Version("returns a tuple", "python", "not-a-record", '''
        def roofline(kernels, arrays, element_bytes, peak_flops, bandwidth):
            nbytes = bytes_moved(kernels, arrays, element_bytes)
            flops = total_flops(kernels)
            intensity = arithmetic_intensity(flops, nbytes)
            return nbytes, flops, intensity, bound(intensity, peak_flops, bandwidth)
    '''),
    Version("returns None", "python", "returned-none", '''
        def roofline(kernels, arrays, element_bytes, peak_flops, bandwidth):
            nbytes = bytes_moved(kernels, arrays, element_bytes)
            flops = total_flops(kernels)
            result = {"bytes": nbytes, "flops": flops, "intensity": flops / nbytes,
                      "bound": bound(flops / nbytes, peak_flops, bandwidth)}
    '''),
    Version("empties the kernel list", "python", "mutated-input", '''
        def total_flops(kernels):
            total = 0
            while kernels:
                total += kernels.pop()["flops"]
            return total

        def roofline(kernels, arrays, element_bytes, peak_flops, bandwidth):
            nbytes = bytes_moved(kernels, arrays, element_bytes)
            flops = total_flops(kernels)
            intensity = arithmetic_intensity(flops, nbytes)
            return {"bytes": nbytes, "flops": flops, "intensity": intensity,
                    "bound": bound(intensity, peak_flops, bandwidth)}
    '''),
    Version("intensity rounded to three decimals", "python", "unknown", '''
        def arithmetic_intensity(flops, nbytes):
            return round(flops / nbytes, 3)
    '''),
    Version("a kernel's own key for its arrays", "python", "error:key-error", '''
        def bytes_moved(kernels, arrays, element_bytes):
            total = 0
            for kernel in kernels:
                for name in kernel["inputs"] + kernel["outputs"]:
                    total += arrays[name] * element_bytes
            return total
    '''),
    Version("a kernel loop that never moves on", "python", "timed-out", '''
        def total_flops(kernels):
            total, i = 0, 0
            while i < len(kernels):
                total += kernels[i]["flops"]
            return total
    '''),
)

RIGHT = (
    Version("one comprehension per total", "python", None, '''
        def bytes_moved(kernels, arrays, element_bytes):
            return element_bytes * sum(arrays[name] for kernel in kernels
                                       for name in kernel["reads"] + kernel["writes"])

        def total_flops(kernels):
            return sum(k["flops"] for k in kernels)
    '''),
    Version("time on each roof", "python", None, '''
        def bound(intensity, peak_flops, bandwidth):
            # per byte moved: 1 / bandwidth seconds of traffic, intensity / peak_flops of math
            if intensity * bandwidth < peak_flops:
                return "memory-bound"
            return "compute-bound"
    '''),
    Version("reads and writes kept apart", "python", None, '''
        def bytes_moved(kernels, arrays, element_bytes):
            read = sum(arrays[n] for k in kernels for n in k["reads"]) * element_bytes
            written = sum(arrays[n] for k in kernels for n in k["writes"]) * element_bytes
            return read + written

        def roofline(kernels, arrays, element_bytes, peak_flops, bandwidth):
            flops = total_flops(kernels)
            nbytes = bytes_moved(kernels, arrays, element_bytes)
            return dict(bytes=nbytes, flops=flops, intensity=flops / nbytes,
                        bound=bound(flops / nbytes, peak_flops, bandwidth))
    '''),
)
