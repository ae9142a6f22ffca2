"""Honest launchers the grader once failed, each a variant of the reference softmax's launcher.

Each stands in for the reference ``softmax_triton``'s last two lines (its launch and ``return
output``). The kernel is the reference's and computes the softmax from what it is given; the
launcher prepares that with torch in a way that keeps the inputs' values (a mask filled with
torch.where, a division by a one-value tensor, a copy through index_select) or scatters the
kernel's output into place. ``tests/test_hostile.py`` grades each and asserts it passes.
"""

# the reference solution's lines each launcher replaces
REFERENCE_LAUNCH = """\
    softmax_kernel[(n_rows,)](output, x, output.stride(0), x.stride(0), n_cols, BLOCK=block)
    return output
"""

# the usual launch, on a prepared copy ``xw`` of the input
_ON_XW = """\
    softmax_kernel[(n_rows,)](output, xw, output.stride(0), xw.stride(0), n_cols, BLOCK=block)
    return output
"""

LAUNCHERS = {
    "clamp_noop": '    xw = x.clamp(min=-float("inf"))\n' + _ON_XW,
    "div_temperature_tensor": "    xw = x / torch.tensor(1.0, dtype=x.dtype, device=x.device)\n"
    + _ON_XW,
    "index_select": "    xw = x.index_select(0, torch.arange(n_rows, device=x.device))\n" + _ON_XW,
    "masked_fill": '    xw = x.masked_fill(torch.isnan(x), float("nan"))\n' + _ON_XW,
    "mul_ones_like": "    xw = x * torch.ones_like(x)\n" + _ON_XW,
    "nan_to_num": '    xw = torch.nan_to_num(x, nan=float("nan"), posinf=float("inf"),'
    ' neginf=-float("inf"))\n' + _ON_XW,
    "where": '    xw = torch.where(torch.isnan(x), torch.full_like(x, float("nan")), x)\n' + _ON_XW,
    "where_scalar": '    xw = torch.where(torch.isnan(x), float("nan"), x)\n' + _ON_XW,
    "index_put_output": """\
    tmp = torch.empty_like(output)
    softmax_kernel[(n_rows,)](tmp, x, tmp.stride(0), x.stride(0), n_cols, BLOCK=block)
    output.index_put_((torch.arange(n_rows, device=x.device),), tmp)
    return output
""",
    # padded by torch.cat with a tensor of -inf, and by assigning into a slice of one: the
    # padded input holds the inputs' values and one constant, which nothing outside torch made
    "cat_with_full": """\
    pad = torch.full((n_rows, block - n_cols), -float("inf"), dtype=x.dtype, device=x.device)
    xp = torch.cat([x, pad], dim=1)
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].contiguous()
""",
    "slice_of_new_full": """\
    xp = x.new_full((n_rows, block), -float("inf"))
    xp[:, :n_cols] = x
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].clone()
""",
    # the same padding in memory from torch.empty, filled whole or by a slice
    "empty_then_fill": """\
    xp = torch.empty((n_rows, block), dtype=x.dtype, device=x.device)
    xp.fill_(-float("inf"))
    xp[:, :n_cols].copy_(x)
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].contiguous()
""",
    "empty_then_slice_set": """\
    xp = x.new_empty((n_rows, block))
    xp[:, n_cols:] = -float("inf")
    xp[:, :n_cols] = x
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].contiguous()
""",
    # a padded scratch buffer kept between calls, its padding written once: the grader's runs
    # that change what launches are given must leave it as they found it
    "padded_scratch_kept_between_calls": """\
    scratch = softmax_triton.__dict__.setdefault("scratch", {})
    key = (n_rows, n_cols, block, x.dtype, x.device)
    if key not in scratch:
        scratch[key] = x.new_full((n_rows, block), -float("inf"))
    xp = scratch[key]
    xp[:, :n_cols] = x
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].contiguous()
""",
    # padded to the block by torch, with the padding filled with -inf: the kernel masks nothing
    "pad_then_masked_fill": """\
    xp = torch.nn.functional.pad(x, (0, block - n_cols))
    cols = torch.arange(block, device=x.device)
    xp = xp.masked_fill(cols[None, :] >= n_cols, -float("inf"))
    outp = torch.empty_like(xp)
    softmax_kernel[(n_rows,)](outp, xp, outp.stride(0), xp.stride(0), block, BLOCK=block)
    return outp[:, :n_cols].contiguous()
""",
}
