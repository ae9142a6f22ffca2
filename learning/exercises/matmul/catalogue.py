"""Other matrix products: the mistakes lesson 12 warns about, and correct ones in other styles."""

from learning.grader.catalogue import Version

# The Triton versions replace matmul_kernel; this is the reference's body with one change each.
_KERNEL = '''
    @triton.jit
    def matmul_kernel(c_ptr, a_ptr, b_ptr, stride_cm, stride_cn, stride_am, stride_ak,
                      stride_bk, stride_bn, M, N, K, BLOCK_M: tl.constexpr,
                      BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
        steps = tl.arange(0, BLOCK_K)
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for k0 in range(0, K, BLOCK_K):
            ks = k0 + steps
            a = tl.load(a_ptr + rows[:, None] * stride_am + ks[None, :] * stride_ak,
                        mask=(rows[:, None] < M) & (ks[None, :] < K), other=0.0)
            b = tl.load(b_ptr + ks[:, None] * stride_bk + cols[None, :] * stride_bn,
                        mask=(ks[:, None] < K) & (cols[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
        c = acc.to(c_ptr.dtype.element_ty)
        tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn, c,
                 mask=(rows[:, None] < M) & (cols[None, :] < N))
'''


def _kernel(*edits: tuple[str, str]) -> str:
    """The reference kernel with each (old, new) edit made; an edit that finds nothing fails."""
    text = _KERNEL
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the catalogue's kernel has no {old!r}")
        text = text.replace(old, new)
    return text


_LAUNCH = '''
    def matmul_triton(a, b):
        M, K = a.shape
        N = b.shape[1]
        c = torch.empty((M, N), dtype=a.dtype, device=a.device)
        grid = {grid}
        matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), {strides}, M, N, K,
                            BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
        return c
'''


def _launcher(grid: str = "(triton.cdiv(M, 32), triton.cdiv(N, 32))",
              strides: str = "a.stride(0), a.stride(1), b.stride(0), b.stride(1)") -> str:
    return _LAUNCH.format(grid=grid, strides=strides)


PYTHON = (
    Version("the K loop stops at the last whole block", "python", "k-tail-dropped", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    acc = [[0.0] * block for _ in range(block)]
                    for k0 in range(0, k - k % block, block):
                        for i in range(block):
                            for j in range(block):
                                for kk in range(k0, k0 + block):
                                    if i0 + i < m and j0 + j < n:
                                        acc[i][j] += a[i0 + i][kk] * b[kk][j0 + j]
                    for i in range(min(block, m - i0)):
                        for j in range(min(block, n - j0)):
                            c[i0 + i][j0 + j] = acc[i][j]
            return c
    '''),
    Version("only whole tiles of C", "python", "edge-tiles-dropped", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m - m % block, block):
                for j0 in range(0, n - n % block, block):
                    for i in range(i0, i0 + block):
                        for j in range(j0, j0 + block):
                            c[i][j] = sum(a[i][kk] * b[kk][j] for kk in range(k))
            return c
    '''),
    Version("the accumulator reset in the K loop", "python", "acc-reset", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    for k0 in range(0, k, block):
                        acc = [[0.0] * block for _ in range(block)]
                        for i in range(block):
                            for j in range(block):
                                for kk in range(k0, min(k0 + block, k)):
                                    if i0 + i < m and j0 + j < n:
                                        acc[i][j] += a[i0 + i][kk] * b[kk][j0 + j]
                    for i in range(min(block, m - i0)):
                        for j in range(min(block, n - j0)):
                            c[i0 + i][j0 + j] = acc[i][j]
            return c
    '''),
    Version("tiles read past the edges", "python", "unpadded-edges", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    for k0 in range(0, k, block):
                        for i in range(i0, i0 + block):
                            for j in range(j0, j0 + block):
                                c[i][j] += sum(a[i][t] * b[t][j] for t in range(k0, k0 + block))
            return c
    '''),
    Version("pads a and b in place", "python", "mutated-input", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            for row in a:  # pad the inputs themselves: every tile is then whole
                row.extend([0.0] * (-k % block))
            for row in b:
                row.extend([0.0] * (-n % block))
            b.extend([[0.0] * len(b[0]) for _ in range(-k % block)])
            c = [[0.0] * n for _ in range(m)]
            for i in range(m):
                for j in range(n):
                    c[i][j] = sum(a[i][t] * b[t][j] for t in range(k))
            return c
    '''),
    Version("returns C transposed", "python", "wrong-length", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            return [[sum(a[i][t] * b[t][j] for t in range(k)) for i in range(m)]
                    for j in range(n)]
    '''),
    Version("one list shared by every row of C", "python", "unknown", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n] * m  # m references to one row
            for i in range(m):
                for j in range(n):
                    c[i][j] = sum(a[i][t] * b[t][j] for t in range(k))
            return c
    '''),
    Version("b indexed as b[column][row]", "python", "error:list-index", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    for i in range(i0, min(i0 + block, m)):
                        for j in range(j0, min(j0 + block, n)):
                            c[i][j] = sum(a[i][t] * b[j][t] for t in range(k))
            return c
    '''),
    Version("a while loop over K that never advances", "python", "timed-out", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            k0 = 0
            while k0 < k:
                for i in range(m):
                    for j in range(n):
                        for t in range(k0, min(k0 + block, k)):
                            c[i][j] += a[i][t] * b[t][j]
            return c
    '''),
    Version("the K loop bounded by M", "python", "unknown", '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    acc = [[0.0] * block for _ in range(block)]
                    for k0 in range(0, m, block):
                        a_tile = [[a[i][kk] if i < m and kk < k else 0.0
                                   for kk in range(k0, k0 + block)] for i in range(i0, i0 + block)]
                        b_tile = [[b[kk][j] if kk < k and j < n else 0.0
                                   for j in range(j0, j0 + block)] for kk in range(k0, k0 + block)]
                        for i in range(block):
                            for j in range(block):
                                acc[i][j] += sum(a_tile[i][t] * b_tile[t][j] for t in range(block))
                    for i in range(block):
                        for j in range(block):
                            if i0 + i < m and j0 + j < n:
                                c[i0 + i][j0 + j] = acc[i][j]
            return c
    '''),
)

TRITON = (
    Version("the K edge padded with -inf", "triton", "k-padding-not-zero", _kernel(
        ("(ks[None, :] < K), other=0.0)", "(ks[None, :] < K), other=-float('inf'))"),
        ("(cols[None, :] < N), other=0.0)", "(cols[None, :] < N), other=-float('inf'))"))),
    Version("the K edge padded with 1", "triton", "k-padding-not-zero", _kernel(
        ("(ks[None, :] < K), other=0.0)", "(ks[None, :] < K), other=1.0)"),
        ("(cols[None, :] < N), other=0.0)", "(cols[None, :] < N), other=1.0)"))),
    Version("the K edge unmasked", "triton", "out-of-bounds", _kernel(
        ("mask=(rows[:, None] < M) & (ks[None, :] < K)", "mask=rows[:, None] < M"),
        ("mask=(ks[:, None] < K) & (cols[None, :] < N)", "mask=cols[None, :] < N")),
        interpreter_only=True),
    Version("only a masked along K", "triton", "out-of-bounds", _kernel(
        ("mask=(ks[:, None] < K) & (cols[None, :] < N)", "mask=cols[None, :] < N")),
        interpreter_only=True),
    Version("loads and store masked along K only", "triton", "out-of-bounds", _kernel(
        ("mask=(rows[:, None] < M) & (ks[None, :] < K)", "mask=ks[None, :] < K"),
        ("mask=(ks[:, None] < K) & (cols[None, :] < N)", "mask=ks[:, None] < K"),
        ("c,\n                 mask=(rows[:, None] < M) & (cols[None, :] < N))", "c)")),
        interpreter_only=True),
    Version("the K loop stops at the last whole block", "triton", "k-loop-short", _kernel(
        ("for k0 in range(0, K, BLOCK_K):", "for k0 in range(0, (K // BLOCK_K) * BLOCK_K, "
         "BLOCK_K):"))),
    Version("tl.cdiv rounded down", "triton", "k-loop-short", _kernel(
        ("for k0 in range(0, K, BLOCK_K):\n            ks = k0 + steps",
         "for step in range(0, K // BLOCK_K):\n            ks = step * BLOCK_K + steps"))),
    Version("acc = instead of acc +=", "triton", "acc-overwritten", _kernel(
        ("acc += tl.dot(a, b)", "acc = tl.dot(a, b)"))),
    # Its replay rounds as the interpreter does; on the H200 (Triton 3.6, 2026-12-01) the
    # tensor cores' rounding differed, and the grader described the output without a cause.
    Version("the accumulator in the inputs' dtype", "triton", "acc-input-dtype", _kernel(
        ("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
         "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=c_ptr.dtype.element_ty)"),
        ("acc += tl.dot(a, b)", "acc += tl.dot(a, b).to(c_ptr.dtype.element_ty)")),
        interpreter_only=True),
    # The GPU compiles it too: TF32 products of whole numbers and their float32 block sums
    # are exact, so only the two float16 roundings the replay makes remain.
    Version("a float16 accumulator on any inputs", "triton", "acc-float16", _kernel(
        ("acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)",
         "acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float16)"),
        ("acc += tl.dot(a, b)", "acc += tl.dot(a, b).to(tl.float16)"))),
    Version("the tutorial's float16 store", "triton", "stored-as-float16", _kernel(
        ("c = acc.to(c_ptr.dtype.element_ty)", "c = acc.to(tl.float16)"))),
    Version("a grid of whole tiles", "triton", "whole-tiles-grid",
            _launcher(grid="(M // 32, N // 32)")),
    Version("the grid's axes swapped", "triton", "grid-axes-swapped",
            _launcher(grid="(triton.cdiv(N, 32), triton.cdiv(M, 32))")),
    Version("a's and b's offsets swapped", "triton", "operand-offsets-swapped", _kernel(
        ("a_ptr + rows[:, None] * stride_am", "a_ptr + cols[:, None] * stride_am"),
        ("mask=(rows[:, None] < M) & (ks[None, :] < K)",
         "mask=(cols[:, None] < M) & (ks[None, :] < K)"),
        ("cols[None, :] * stride_bn,\n                        mask=(ks[:, None] < K) & "
         "(cols[None, :] < N)",
         "rows[None, :] * stride_bn,\n                        mask=(ks[:, None] < K) & "
         "(rows[None, :] < N)"))),
    Version("strides of contiguous tensors", "triton", "strides-assumed",
            _launcher(strides="K, 1, N, 1")),
    Version("a's row stride taken to be K", "triton", "strides-assumed",
            _launcher(strides="K, 1, b.stride(0), b.stride(1)")),
    Version("b's strides taken to be those of a contiguous b", "triton", "strides-assumed",
            _launcher(strides="a.stride(0), a.stride(1), N, 1")),
    Version("a's column stride taken to be 1", "triton", "column-stride-assumed",
            _launcher(strides="a.stride(0), 1, b.stride(0), b.stride(1)")),
    Version("b's column stride taken to be 1", "triton", "column-stride-assumed",
            _launcher(strides="a.stride(0), a.stride(1), b.stride(0), 1")),
    Version("returns float32 for 16-bit inputs", "triton", "wrong-dtype", '''
        def matmul_triton(a, b):
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty((M, N), dtype=torch.float32, device=a.device)
            grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
            matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1),
                                b.stride(0), b.stride(1), M, N, K,
                                BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
            return c
    '''),
    Version("tiles of 48", "triton", "error:arange-power-of-two", '''
        def matmul_triton(a, b):
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty((M, N), dtype=a.dtype, device=a.device)
            grid = (triton.cdiv(M, 48), triton.cdiv(N, 48))
            matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1),
                                b.stride(0), b.stride(1), M, N, K,
                                BLOCK_M=48, BLOCK_N=48, BLOCK_K=32)
            return c
    '''),
    Version("tl.dot's operands swapped", "triton", "unknown", _kernel(
        ("acc += tl.dot(a, b)", "acc += tl.dot(b, a)"))),
    Version("a's strides passed in the wrong order", "triton", "out-of-bounds",
            _launcher(strides="a.stride(1), a.stride(0), b.stride(0), b.stride(1)"),
            interpreter_only=True),
    Version("the store masked along M only", "triton", "out-of-bounds", _kernel(
        ("mask=(rows[:, None] < M) & (cols[None, :] < N))", "mask=rows[:, None] < M)")),
        interpreter_only=True),
    Version("C allocated like a", "triton", "wrong-shape", '''
        def matmul_triton(a, b):
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty_like(a)
            grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
            matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1),
                                b.stride(0), b.stride(1), M, N, K,
                                BLOCK_M=32, BLOCK_N=32, BLOCK_K=32)
            return c
    '''),
)


# The plan's versions replace matmul_plan; this is the solution's body with one change each.
_PLAN = '''
    def matmul_plan(m, n, k, a_strides, b_strides, element_bytes, block):
        block_m, block_n, block_k = block
        tiles = triton.cdiv(m, block_m) * triton.cdiv(n, block_n)
        k_steps = triton.cdiv(k, block_k)

        def aligned(strides):
            return strides[1] == 1 and strides[0] * element_bytes % 16 == 0

        a_aligned, b_aligned = aligned(a_strides), aligned(b_strides)
        large = m * n * k >= 2**28
        return {
            "tiles": tiles,
            "k_steps": k_steps,
            "masked": k % block_k != 0,
            "a_aligned": a_aligned,
            "b_aligned": b_aligned,
            "copy_a": not a_aligned and large,
            "copy_b": not b_aligned and large,
            "padding": tiles * block_m * block_n * k_steps * block_k - m * n * k,
        }
'''


def _plan(*edits: tuple[str, str]) -> str:
    """The solution's plan with each (old, new) edit made; an edit that finds nothing fails."""
    text = _PLAN
    for old, new in edits:
        if old not in text:
            raise ValueError(f"the catalogue's plan has no {old!r}")
        text = text.replace(old, new)
    return text


PLAN = (
    Version("whole tiles and steps only", "plan", "whole-tiles", _plan(
        ("triton.cdiv(m, block_m) * triton.cdiv(n, block_n)", "(m // block_m) * (n // block_n)"),
        ("k_steps = triton.cdiv(k, block_k)", "k_steps = k // block_k"))),
    Version("alignment tested on the stride in elements", "plan", "aligned-in-elements", _plan(
        ("strides[0] * element_bytes % 16 == 0", "strides[0] % 16 == 0"))),
    Version("the column stride not looked at", "plan", "column-stride-ignored", _plan(
        ("return strides[1] == 1 and strides[0]", "return strides[0]"))),
    Version("masked when K is whole steps", "plan", "masked-inverted", _plan(
        ('"masked": k % block_k != 0', '"masked": k % block_k == 0'))),
    Version("masked when K is not a multiple of 16", "plan", "masked-by-16", _plan(
        ('"masked": k % block_k != 0', '"masked": k % 16 != 0'))),
    Version("every unaligned operand copied", "plan", "copies-every-size", _plan(
        ('"copy_a": not a_aligned and large', '"copy_a": not a_aligned'),
        ('"copy_b": not b_aligned and large', '"copy_b": not b_aligned'))),
    Version("the padding of the K edge left out", "plan", "padding-without-k", _plan(
        ("block_n * k_steps * block_k - m * n * k", "block_n * k - m * n * k"))),
    Version("the work done, not the padding", "plan", "padding-not-subtracted", _plan(
        ("block_n * k_steps * block_k - m * n * k", "block_n * k_steps * block_k"))),
    Version("the K step spelt as in the kernel", "plan", "error:name-not-defined", _plan(
        ("k_steps = triton.cdiv(k, block_k)", "k_steps = triton.cdiv(k, BLOCK_K)"))),
    Version("every operand of a large product copied, aligned or not", "plan", "unknown", _plan(
        ('"copy_a": not a_aligned and large', '"copy_a": large'),
        ('"copy_b": not b_aligned and large', '"copy_b": large'))),
    Version("the padding counted per program", "plan", "unknown", _plan(
        ("block_n * k_steps * block_k - m * n * k",
         "block_n * k_steps * block_k // tiles - m * n * k // tiles"))),
)

WRONG = PYTHON + TRITON + PLAN

RIGHT = (
    Version("whole-row products, no tiles", "python", None, '''
        def matmul_python(a, b, block):
            columns = list(zip(*b))
            return [[math.fsum(x * y for x, y in zip(row, column)) for column in columns]
                    for row in a]

        import math
    '''),
    Version("tiles clipped at the edges instead of padded", "python", None, '''
        def matmul_python(a, b, block):
            m, k, n = len(a), len(b), len(b[0])
            c = [[0.0] * n for _ in range(m)]
            for i0 in range(0, m, block):
                for j0 in range(0, n, block):
                    for k0 in range(0, k, block):
                        for i in range(i0, min(i0 + block, m)):
                            for j in range(j0, min(j0 + block, n)):
                                for t in range(k0, min(k0 + block, k)):
                                    c[i][j] += a[i][t] * b[t][j]
            return c
    '''),
    Version("grouped program order, one axis", "triton", None, '''
        @triton.jit
        def matmul_kernel(c_ptr, a_ptr, b_ptr, stride_cm, stride_cn, stride_am, stride_ak,
                          stride_bk, stride_bn, M, N, K, BLOCK_M: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
            pid = tl.program_id(0)
            tiles_m = tl.cdiv(M, BLOCK_M)
            tiles_n = tl.cdiv(N, BLOCK_N)
            group = pid // (GROUP_M * tiles_n)
            first = group * GROUP_M
            height = min(tiles_m - first, GROUP_M)
            pid_m = first + (pid % (GROUP_M * tiles_n)) % height
            pid_n = (pid % (GROUP_M * tiles_n)) // height
            rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
            cols = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
            a_ptrs = a_ptr + rows[:, None] * stride_am + tl.arange(0, BLOCK_K)[None, :] * stride_ak
            b_ptrs = b_ptr + tl.arange(0, BLOCK_K)[:, None] * stride_bk + cols[None, :] * stride_bn
            acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
            for step in range(0, tl.cdiv(K, BLOCK_K)):
                left = K - step * BLOCK_K
                a = tl.load(a_ptrs, mask=(rows[:, None] < M)
                            & (tl.arange(0, BLOCK_K)[None, :] < left), other=0.0)
                b = tl.load(b_ptrs, mask=(tl.arange(0, BLOCK_K)[:, None] < left)
                            & (cols[None, :] < N), other=0.0)
                acc = tl.dot(a, b, acc)
                a_ptrs += BLOCK_K * stride_ak
                b_ptrs += BLOCK_K * stride_bk
            tl.store(c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn,
                     acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))

        def matmul_triton(a, b):
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty((M, N), dtype=a.dtype, device=a.device)
            grid = (triton.cdiv(M, 32) * triton.cdiv(N, 32),)
            matmul_kernel[grid](c, a, b, c.stride(0), c.stride(1), a.stride(0), a.stride(1),
                                b.stride(0), b.stride(1), M, N, K,
                                BLOCK_M=32, BLOCK_N=32, BLOCK_K=32, GROUP_M=4)
            return c
    '''),
    Version("rows wrapped with % M instead of masked", "triton", None, _kernel(
        ("rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)",
         "rows = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)\n"
         "        wrapped = rows % M  # a row past M reads a real row; the store drops it"),
        ("a_ptr + rows[:, None] * stride_am", "a_ptr + wrapped[:, None] * stride_am"),
        ("mask=(rows[:, None] < M) & (ks[None, :] < K)", "mask=ks[None, :] < K"))),
    Version("contiguous copies in the launcher", "triton", None, '''
        def matmul_triton(a, b):
            a, b = a.contiguous(), b.contiguous()
            M, K = a.shape
            N = b.shape[1]
            c = torch.empty((M, N), dtype=a.dtype, device=a.device)
            grid = (triton.cdiv(M, 16), triton.cdiv(N, 64))
            matmul_kernel[grid](c, a, b, N, 1, K, 1, N, 1, M, N, K,
                                BLOCK_M=16, BLOCK_N=64, BLOCK_K=16)
            return c
    '''),
    Version("a plan in other words: math.ceil, and the bytes of a row", "plan", None, '''
        def matmul_plan(m, n, k, a_strides, b_strides, element_bytes, block):
            import math

            bm, bn, bk = block
            tiles = math.ceil(m / bm) * math.ceil(n / bn)
            steps = math.ceil(k / bk)
            row_bytes_a, row_bytes_b = a_strides[0] * element_bytes, b_strides[0] * element_bytes
            a_ok = a_strides[1] == 1 and row_bytes_a % 16 == 0
            b_ok = b_strides[1] == 1 and row_bytes_b % 16 == 0
            worth = m * n * k >= 2 ** 28
            plan = {"tiles": tiles, "k_steps": steps, "masked": steps * bk != k}
            plan.update(a_aligned=a_ok, b_aligned=b_ok, copy_a=worth and not a_ok,
                        copy_b=worth and not b_ok)
            plan["padding"] = tiles * steps * bm * bn * bk - m * n * k
            return plan
    '''),
)
