"""Memory maps: which program of a kernel read and wrote which element, and how check draws it.

The known-wrong kernels here make the address and mask mistakes the course is about; the tests
assert on the recorded maps themselves (which program touched which element), then on the
drawing: two maps side by side, aligned at 80 columns when piped.
"""

import io
import itertools
import json
import re
import textwrap
from pathlib import Path

import numpy as np
import pytest

from learning import check, computed
from learning.grader import map_run, map_view, memory_map, registry, sanitizer
from learning.grader.map_view import symbol
from learning.grader.tensors import TensorSpec
from tests.helpers import solution_text, write_module


@pytest.fixture
def interpreter(mode):
    if not mode.interpret:
        pytest.skip("maps are recorded in Triton's interpreter; kernels are compiled here")
    assert sanitizer.install(), "this Triton's interpreter no longer has the hooks maps use"


def _kernels():
    """A right row copy, and the row kernels' mistakes, one kernel each."""
    import triton
    import triton.language as tl

    @triton.jit
    def copy_rows(out_ptr, in_ptr, out_stride, in_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * out_stride + cols, x, mask=cols < n_cols)

    @triton.jit
    def copy_rows_other_style(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                              BLOCK: tl.constexpr):
        offsets = tl.program_id(0).to(tl.int64) * in_stride + tl.arange(0, BLOCK)
        keep = tl.arange(0, BLOCK) < n_cols
        x = tl.load(in_ptr + offsets, keep)
        target = out_ptr + tl.program_id(0) * out_stride
        tl.store(target + tl.arange(0, BLOCK), x, keep)

    @triton.jit
    def row_offset_from_block(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                              BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * BLOCK + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * BLOCK + cols, x, mask=cols < n_cols)

    @triton.jit
    def n_cols_as_stride(out_ptr, in_ptr, out_stride, in_stride, n_cols, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * n_cols + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * out_stride + cols, x, mask=cols < n_cols)

    @triton.jit
    def two_programs_per_row(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                             BLOCK: tl.constexpr):
        row = tl.program_id(0) // 2
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row * out_stride + cols, x, mask=cols < n_cols)

    @triton.jit
    def add_relu(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.maximum(total, 0.0), mask=mask)

    @triton.jit
    def add_relu_store_without_mask(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offsets < n
        total = tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask)
        tl.store(out_ptr + offsets, tl.maximum(total, 0.0))

    @triton.jit
    def copy_rows_one_column_more(out_ptr, in_ptr, out_stride, in_stride, n_cols,
                                  BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        x = tl.load(in_ptr + row * in_stride + cols, mask=cols <= n_cols, other=0.0)
        tl.store(out_ptr + row * out_stride + cols, x, mask=cols < n_cols)

    @triton.jit
    def copy_tiles(out_ptr, in_ptr, out_stride, in_stride, n_rows, n_cols,
                   BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.arange(0, BLOCK_C)
        inside = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        x = tl.load(in_ptr + rows[:, None] * in_stride + cols[None, :], mask=inside, other=0.0)
        tl.store(out_ptr + rows[:, None] * out_stride + cols[None, :], x, mask=inside)

    @triton.jit
    def copy_tiles_columns_unmasked(out_ptr, in_ptr, out_stride, in_stride, n_rows, n_cols,
                                    BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
        # matmul's k loop without its mask on k: the load reads past the last column
        rows = tl.program_id(0) * BLOCK_R + tl.arange(0, BLOCK_R)
        cols = tl.arange(0, BLOCK_C)
        x = tl.load(in_ptr + rows[:, None] * in_stride + cols[None, :],
                    mask=rows[:, None] < n_rows, other=0.0)
        tl.store(out_ptr + rows[:, None] * out_stride + cols[None, :], x,
                 mask=(rows[:, None] < n_rows) & (cols[None, :] < n_cols))

    @triton.jit
    def copy_heads(out_ptr, in_ptr, stride_b, stride_h, stride_s, n_heads, seq,
                   SWAPPED: tl.constexpr, BLOCK_S: tl.constexpr, D: tl.constexpr):
        # one program per (batch, head), as attention's program_id(1)
        pid = tl.program_id(0)
        batch, head = pid // n_heads, pid % n_heads
        if SWAPPED:
            batch, head = pid % n_heads, pid // n_heads
        rows = tl.arange(0, BLOCK_S)
        dims = tl.arange(0, D)
        at = batch * stride_b + head * stride_h + rows[:, None] * stride_s + dims[None, :]
        x = tl.load(in_ptr + at, mask=rows[:, None] < seq)
        tl.store(out_ptr + at, x, mask=rows[:, None] < seq)

    return {"copy_rows": copy_rows, "copy_rows_other_style": copy_rows_other_style,
            "row_offset_from_block": row_offset_from_block, "n_cols_as_stride": n_cols_as_stride,
            "two_programs_per_row": two_programs_per_row, "add_relu": add_relu,
            "add_relu_store_without_mask": add_relu_store_without_mask,
            "copy_rows_one_column_more": copy_rows_one_column_more, "copy_tiles": copy_tiles,
            "copy_tiles_columns_unmasked": copy_tiles_columns_unmasked,
            "copy_heads": copy_heads}


def _rows(kernel, programs=None):
    """A launcher: one program per row unless ``programs`` (rows -> grid size) says otherwise."""
    def launch(x):
        import torch
        import triton

        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        grid = (programs(x.shape[0]) if programs else x.shape[0],)
        kernel[grid](out, x, out.stride(0), x.stride(0), x.shape[1],
                     BLOCK=triton.next_power_of_2(x.shape[1]))
        return out

    return launch


def _tiles(kernel, rows_per_program=4):
    """A launcher of one program per ``rows_per_program`` rows, each a tile of whole rows."""
    def launch(x):
        import torch
        import triton

        out = torch.empty_like(x, memory_format=torch.contiguous_format)
        grid = (triton.cdiv(x.shape[0], rows_per_program),)
        kernel[grid](out, x, out.stride(0), x.stride(0), x.shape[0], x.shape[1],
                     BLOCK_R=rows_per_program, BLOCK_C=triton.next_power_of_2(x.shape[1]))
        return out

    return launch


def _heads(swapped: bool):
    """A launcher of copy_heads on a (batch, heads, seq, d) tensor, one program per head."""
    def launch(x):
        import torch
        import triton

        out = torch.empty_like(x)
        batch, heads, seq, d = x.shape
        _kernels()["copy_heads"][(batch * heads,)](
            out, x, x.stride(0), x.stride(1), x.stride(2), heads, seq, SWAPPED=swapped,
            BLOCK_S=triton.next_power_of_2(seq), D=d)
        return out

    return launch


def _elementwise(kernel, grid_of=lambda n, block: -(-n // block), block=4):
    def launch(x, y):
        import torch

        out = torch.empty_like(x)
        kernel[(grid_of(x.numel(), block),)](out, x, y, x.numel(), BLOCK=block)
        return out

    return launch


def _matrix(rows, cols, layout="contiguous"):
    values = np.arange(rows * cols, dtype=np.float64).reshape(rows, cols)
    return (TensorSpec(values, layout=layout),)


def _vectors(n):
    return (TensorSpec(np.arange(n, dtype=np.float64)), TensorSpec(np.ones(n)))


def _record(function, args):
    return memory_map.CaseMap.from_data(memory_map.record_call(function, args))


def _cells(rows, cols):
    return [(r, c) for r in range(rows) for c in range(cols)]


def test_the_right_kernel_reads_and_writes_each_row_with_its_own_program(interpreter):
    case_map = _record(_rows(_kernels()["copy_rows"]), _matrix(5, 17))
    assert [t.label for t in case_map.tensors] == ["output", "x"]
    for row, col in _cells(5, 17):
        assert case_map.programs_at("output", "store", (row, col)) == [row]
        assert case_map.programs_at("x", "load", (row, col)) == [row]
    assert case_map.outside("x", "load") == [] and case_map.never("output", "store") == []
    assert case_map.programs == {r: (r, 0, 0) for r in range(5)}
    assert all(a.masked == 15 and a.lanes == 32 for a in case_map.accesses)


def test_a_right_kernel_in_another_style_has_the_references_map(interpreter):
    kernels = _kernels()
    for args in (_matrix(5, 17), _matrix(6, 50, "row-strided"), _matrix(4, 40, "column-slice")):
        mine = _record(_rows(kernels["copy_rows_other_style"]), args)
        reference = _record(_rows(kernels["copy_rows"]), args)
        for label, kind in (("output", "store"), ("x", "load")):
            assert mine.same(reference, label, kind)
            assert mine.grid(label, kind) == reference.grid(label, kind)


def test_a_row_offset_from_block_reads_across_rows_then_past_the_end(interpreter):
    # 17 columns in a BLOCK of 32: row r starts 32 r elements in, not 17 r.
    case_map = _record(_rows(_kernels()["row_offset_from_block"]), _matrix(5, 17))
    assert case_map.programs_at("x", "load", (0, 16)) == [0]
    assert case_map.programs_at("x", "load", (1, 14)) == []  # nobody reads it
    assert case_map.programs_at("x", "load", (1, 15)) == [1]  # element 32: program 1's first
    assert case_map.programs_at("x", "load", (2, 14)) == [1]  # element 48: its last
    assert case_map.programs_at("x", "load", (3, 13)) == [2]  # element 64
    assert case_map.programs_at("output", "store", (2, 0)) == [1]
    # Program 3 starts at element 96, past the 85 of the tensor: refused, and recorded.
    assert case_map.outside("x", "load") == [(3, offset) for offset in range(96, 113)]
    assert case_map.stopped.startswith("OutOfBoundsAccess")
    assert 4 not in case_map.programs and len(case_map.never("output", "store")) == 85 - 51


def test_n_cols_as_the_stride_reads_the_padding_rows_of_a_strided_view(interpreter):
    # x[::2] of a 12 x 5 buffer: its rows are 10 elements apart; row r read at 5 r instead.
    case_map = _record(_rows(_kernels()["n_cols_as_stride"]), _matrix(6, 5, "row-strided"))
    for program in range(6):
        row, odd = divmod(program, 2)
        if odd:  # the padding row between two rows of x: outside the tensor, inside its buffer
            start = program * 5
            assert (program, start) in case_map.outside("x", "load")
        else:
            assert case_map.programs_at("x", "load", (row, 0)) == [program]
    assert [r for r in range(6) if case_map.programs_at("x", "load", (r, 0))] == [0, 1, 2]
    assert case_map.stopped == ""  # the padding is inside the buffer: nothing stopped it
    assert all(case_map.programs_at("output", "store", (r, 4)) == [r] for r in range(6))


def test_a_store_without_a_mask_writes_past_the_end_of_the_output(interpreter):
    kernels = _kernels()
    case_map = _record(_elementwise(kernels["add_relu_store_without_mask"]), _vectors(10))
    assert [case_map.programs_at("output", "store", i) for i in range(10)] == \
        [[0]] * 4 + [[1]] * 4 + [[2]] * 2
    assert case_map.outside("output", "store") == [(2, 10), (2, 11)]
    assert case_map.outside("x", "load") == []  # the loads kept their mask
    store = [a for a in case_map.accesses if a.kind == "store" and a.program == 2][0]
    assert (store.lanes, store.masked, len(store.cells), len(store.outside)) == (4, 0, 2, 2)
    reference = _record(_elementwise(kernels["add_relu"]), _vectors(10))
    assert reference.outside("output", "store") == []
    assert [a.masked for a in reference.accesses if a.kind == "store"] == [0, 0, 2]


def test_half_the_grid_leaves_the_last_rows_unwritten(interpreter):
    case_map = _record(_rows(_kernels()["copy_rows"], programs=lambda rows: rows // 2),
                       _matrix(5, 17))
    assert sorted(case_map.programs) == [0, 1]
    assert case_map.never("output", "store") == list(range(2 * 17, 5 * 17))
    assert case_map.programs_at("output", "store", (1, 16)) == [1]


def test_a_floor_divided_grid_never_launches_the_last_partial_block(interpreter):
    case_map = _record(_elementwise(_kernels()["add_relu"], grid_of=lambda n, block: n // block),
                       _vectors(10))
    assert case_map.never("output", "store") == [8, 9]
    assert case_map.never("x", "load") == [8, 9]
    assert case_map.programs_at("output", "store", 7) == [1]


def test_two_programs_writing_one_row_write_it_twice_and_leave_others(interpreter):
    case_map = _record(_rows(_kernels()["two_programs_per_row"]), _matrix(4, 8))
    for col in range(8):
        assert case_map.programs_at("output", "store", (0, col)) == [0, 1]
        assert case_map.programs_at("output", "store", (1, col)) == [2, 3]
        assert case_map.programs_at("x", "load", (1, col)) == [2, 3]
    assert case_map.never("output", "store") == list(range(16, 32))


def test_an_atomic_add_is_drawn_as_a_read_and_a_store_of_its_elements(interpreter):
    # every program adds its block into the first block's elements: the output's map shows
    # them written by every program and the rest never written, where a map of loads and
    # stores alone said no program stored anything
    import triton
    import triton.language as tl

    @triton.jit
    def add_into_first_block(out_ptr, x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        x = tl.load(x_ptr + offsets, mask=offsets < n, other=0.0)
        tl.atomic_add(out_ptr + tl.arange(0, BLOCK), x)

    case_map = _record(_elementwise(add_into_first_block), _vectors(12))
    for i in range(4):
        assert case_map.programs_at("output", "store", i) == [0, 1, 2]
        assert case_map.programs_at("output", "load", i) == [0, 1, 2]
    assert case_map.never("output", "store") == list(range(4, 12))


def test_the_drawing_marks_twice_written_and_unwritten_elements(interpreter):
    kernels = _kernels()
    pair = memory_map.MemoryMap(
        "softmax", "triton", "made up",
        _record(_rows(kernels["two_programs_per_row"]), _matrix(4, 8)),
        _record(_rows(kernels["copy_rows"]), _matrix(4, 8)))
    text = map_view.plain(pair, 80)
    grid = [line for line in text.splitlines() if re.match(r"^ {4}\d ", line)]
    # Each grid is as wide as its title: eight columns, then the gap.
    assert grid[:4] == ["    0 ********      00000000", "    1 ********      11111111",
                        "    2 ........      22222222", "    3 ........      33333333"]
    assert "16 never written; 16 written more than once" in " ".join(text.split())


def test_the_drawing_puts_lanes_outside_where_the_tensor_would_go_on(interpreter):
    kernels = _kernels()
    pair = memory_map.MemoryMap(
        "elementwise", "triton", "made up",
        _record(_elementwise(kernels["add_relu_store_without_mask"]), _vectors(10)),
        _record(_elementwise(kernels["add_relu"]), _vectors(10)))
    text = map_view.plain(pair, 80)
    assert "    0 0000111122!!   0000111122" in text.splitlines(), text
    assert "2 lanes outside the tensor (program 2, line" in " ".join(text.split())
    assert [label for label, _ in map_view.blocks(pair)] == ["output"]  # the loads agree
    # why it stopped: a store with no mask (what a compiled run's own verdict cannot see)
    assert "Your kernel stopped in program 2 (OutOfBoundsAccess: the store has no mask, and " \
           "its lanes run on from inside the tensor past its end);" in " ".join(text.split())
    # the check's run of a case may go last to first and name another program: the map says
    # in which order it ran, so that the two program numbers do not read as a contradiction
    assert "with the programs first to last" in " ".join(text.split())
    assert "Here the programs ran first to last; the check's own run of the case may have " \
           "met another program out of bounds first." in " ".join(text.split())


def test_a_tile_past_the_last_column_reads_the_next_rows_start_not_a_row_past_the_end(
        interpreter):
    # 5 x 7 in tiles of 4 rows x 8 columns, the columns unmasked: lane (r, 7) of row r < 4
    # addresses element (r + 1, 0), still inside x; row 4's addresses the first past its end.
    kernels = _kernels()
    case_map = _record(_tiles(kernels["copy_tiles_columns_unmasked"]), _matrix(5, 7))
    assert case_map.past("x", "load") == [(0, (r, 7), True) for r in range(4)] + \
        [(1, (4, 7), False)]
    assert case_map.outside("x", "load") == [(1, 35)]  # by address: one past the last element
    assert case_map.programs_at("x", "load", (1, 0)) == [0, 0]  # the stray read lands there
    assert case_map.stopped.startswith("OutOfBoundsAccess")
    pair = memory_map.MemoryMap("matmul", "triton", "made up", case_map,
                                _record(_tiles(kernels["copy_tiles"]), _matrix(5, 7)))
    lines = map_view.plain(pair, 80).splitlines()
    x = lines.index(next(line for line in lines if line.startswith("    x (5 x 7")))
    # (4, 0): read by program 1, and by program 0's stray lane from row 3.
    assert lines[x + 3:x + 8] == ["    0 0000000#      0000000", "    1 0000000#      0000000",
                                  "    2 0000000#      0000000", "    3 0000000#      0000000",
                                  "    4 *111111!      1111111"]
    assert not lines[x + 8].startswith("    5")  # no row past the last
    text = " ".join(" ".join(lines).split())
    assert "5 lanes past its last column (column 7) on every row, by programs 0, 1 at line" \
        in text
    assert ": 4 read another element of x in its place, 1 addressed no element of x" in text
    assert "'#' a lane past an edge of the tensor whose address fell on another of its " \
           "elements" in text


def test_a_row_read_one_column_too_far_is_drawn_past_that_row_not_on_a_row_past_the_end(
        interpreter):
    # mask cols <= n_cols: row r < 4 reads (r + 1, 0) as its eighth element, which is x's, and
    # row 4's eighth lane is past x's end, so the interpreter refuses it.
    kernels = _kernels()
    case_map = _record(_rows(kernels["copy_rows_one_column_more"]), _matrix(5, 7))
    assert case_map.programs_at("x", "load", (2, 0)) == [1, 2]
    assert case_map.past("x", "load") == [(4, (4, 7), False)]
    pair = memory_map.MemoryMap("softmax", "triton", "made up", case_map,
                                _record(_rows(kernels["copy_rows"]), _matrix(5, 7)))
    lines = map_view.plain(pair, 80).splitlines()
    x = lines.index(next(line for line in lines if line.startswith("    x (5 x 7")))
    assert lines[x + 7] == "    4 *444444!      4444444" and not lines[x + 8].startswith("    5")
    assert "1 lane past its last column (column 7) on row 4, by program 4 at line" in \
        " ".join(" ".join(lines).split())


def test_a_matmul_k_loop_past_k_draws_columns_past_the_last_of_every_row(interpreter, tmp_path):
    """matmul's K edge (a is 32 x 45, BLOCK_K 32) without the mask on k: every row of the tile
    reads columns 45 to 63; rows 0 to 30 land on the next row's start, row 31 past the end."""
    from learning.grader.catalogue import versions

    version = next(v for v in versions("matmul") if v.name == "the K edge unmasked")
    write_module(tmp_path, "matmul", version.module_text("matmul"))
    pair = map_run.record_map(registry.find("matmul"), tmp_path / "matmul.py", "triton",
                             "K edge")
    assert pair.learner.past("a", "load")[0] == (0, (0, 45), True)
    assert pair.learner.past("a", "load")[-1] == (0, (31, 63), False)
    lines = map_view.plain(pair, 100).splitlines()
    a = lines.index(next(line for line in lines if line.startswith("    a (32 x 45")))
    block = lines[a:lines.index(next(line for line in lines[a:] if "your kernel: " in line))]
    assert block[3].startswith("     0 ") and block[3].split()[1].endswith("######")
    assert block[-1].startswith("    31 ") and block[-1].split()[1].endswith("!!!!!!")
    assert not any(line.startswith("    32 ") for line in block)  # no phantom row past M
    text = " ".join(" ".join(lines).split())
    assert "608 lanes past its last column (columns 45 to 63) on every row, by program 0 at " \
           "line" in text
    assert "589 read another element of a in its place, 19 addressed no element of a" in text


def test_programs_numbered_across_launches_are_not_said_to_be_a_1d_grids_program_ids(
        interpreter, tmp_path):
    """softmax_backward's autograd part launches the forward kernel, then the backward one:
    the backward's only program is drawn as 1, which is no tl.program_id(0) of its grid."""
    text = solution_text("softmax_backward")
    assert "ctx.save_for_backward(y)" in text
    write_module(tmp_path, "softmax_backward",
                 text.replace("ctx.save_for_backward(y)", "ctx.save_for_backward(x)"))
    pair = map_run.record_map(registry.find("softmax_backward"),
                              tmp_path / "softmax_backward.py", "autograd", "worked row")
    text = " ".join(map_view.plain(pair, 80).split())
    assert "1 = (0,)" in text and "in a 1-D grid, its tl.program_id(0)" not in text, text
    assert "numbered in launch order (on from one launch to the next" in text, text


def test_a_four_d_map_labels_rows_by_their_indices_and_leaves_out_only_right_rows(
        interpreter):
    # 3 batches of 3 heads: with batch and head swapped, program 3 copies (0, 1), not (1, 0).
    # The heads on the diagonal are right; each of the six others is wrong in all its rows.
    args = (TensorSpec(np.arange(3 * 3 * 6 * 4, dtype=np.float64).reshape(3, 3, 6, 4)),)
    pair = memory_map.MemoryMap("attention", "triton", "made up",
                                _record(_heads(swapped=True), args),
                                _record(_heads(swapped=False), args))
    lines = map_view.plain(pair, 80).splitlines()
    out = lines[:lines.index(next(line for line in lines if "    x (3 x 3" in line))]
    drawn = {line.split()[0]: line.split()[1:] for line in out
             if re.match(r"^ {4} *\d+,\d+,\d+ ", line)}
    for batch, head in itertools.product(range(3), repeat=2):
        mine, theirs = symbol(batch + 3 * head), symbol(3 * batch + head)
        ends = [f"{batch},{head},0", f"{batch},{head},5"]
        if batch != head:  # a wrong head: its first and last rows, the rest '"'
            assert all(drawn[row] == [mine * 4, theirs * 4] for row in ends), (batch, head)
        else:
            assert f"{batch},{head},2" not in drawn  # right rows are what ':' leaves out
    marks = [line.strip() for line in out if line.strip() in (":", '"')]
    assert marks.count('"') == 6 and marks.count(":") == 3
    key = " ".join(" ".join(lines).split())
    assert "labelled by its other indices: row 1,0,5 is [1, 0, 5, :]" in key
    assert "':' rows left out, drawn alike in both maps" in key
    _assert_aligned(lines)


@pytest.mark.parametrize("width", [80, 60, 120])
def test_wide_and_tall_maps_are_elided_and_stay_aligned(interpreter, width):
    kernels = _kernels()
    args = _matrix(40, 60)
    pair = memory_map.MemoryMap(
        "softmax", "triton", "made up",
        _record(_rows(kernels["copy_rows"], programs=lambda rows: rows // 2), args),
        _record(_rows(kernels["copy_rows"]), args))
    lines = map_view.plain(pair, width).splitlines()
    assert all(len(line) <= width for line in lines)
    _assert_aligned(lines)
    assert any(map_view.ELIDED_COLUMN in line for line in lines)
    # Rows 1 to 18 are right (left out); 20 to 39, never written, are every one drawn.
    labels = [line.split()[0] for line in lines if re.match(r"^ {4} *(\d+ \S|:$)", line)]
    assert labels.count(":") == 2 and "10" not in labels  # output's block, then x's
    assert all(str(row) in labels for row in range(20, 40))


def test_rows_that_differ_are_all_drawn_even_past_the_usual_sixteen(interpreter):
    # Every row written twice by two programs where the reference writes it once: all differ,
    # and no two rows in a row are alike (the reference's program changes each row).
    kernels = _kernels()
    pair = memory_map.MemoryMap(
        "softmax", "triton", "made up",
        _record(_rows(kernels["two_programs_per_row"]), _matrix(24, 8)),
        _record(_rows(kernels["copy_rows"]), _matrix(24, 8)))
    labels = [line.split()[0] for line in map_view.plain(pair, 80).splitlines()
              if re.match(r"^ {4} *\d+ \S", line)]
    assert labels[:24] == [str(row) for row in range(24)]


def _assert_aligned(lines):
    """Every block's rows start both grids at the columns its titles do."""
    titles = [i for i, line in enumerate(lines)
              if re.fullmatch(r" +your kernel {2,}reference", line)]
    assert titles
    for index in titles:
        left = lines[index].index("your kernel")
        right = lines[index].index("reference")
        rows = []
        for line in lines[index + 2:]:
            if not re.match(r'^ {4} *-?\d+(,-?\d+)* |^ {4} *[:"]$', line):
                break
            if line.strip() in (":", '"'):
                continue
            rows.append(line)
            assert line[left - 1] == " " and line[left - 2] != " "  # the label ends there
            # Rows past the tensor's end may hold only the learner's lanes outside it.
            assert line[right - map_view.GAP:right] in (" " * map_view.GAP, "")
        assert rows and len(rows[0]) > right  # the reference's grid is there, not shifted


def test_a_map_case_must_name_a_kernel_case_that_runs_in_the_interpreter():
    exercise = registry.find("softmax")
    assert memory_map.find_case(exercise, "width 3") == ("triton", "width 3")
    assert memory_map.find_case(exercise, "Width  3") == ("triton", "width 3")
    with pytest.raises(memory_map.UnknownCase, match="did you mean 'width 3'"):
        memory_map.find_case(exercise, "width 4")
    with pytest.raises(memory_map.UnknownCase, match="runs only on a GPU"):
        memory_map.find_case(exercise, "bfloat16")


def test_every_kernel_exercise_has_cases_small_enough_to_map():
    kernel_exercises = [e for e in registry.all_exercises()
                        if any(p.needs_kernels for p in e.parts)]
    assert {e.name for e in kernel_exercises} >= {
        "elementwise", "reductions", "softmax", "rmsnorm", "softmax_backward",
        "online_softmax", "matmul"}
    for exercise in kernel_exercises:
        part = next(p for p in exercise.parts if p.needs_kernels)
        assert any(memory_map.small_enough(c) for c in part.cases), exercise.name


@pytest.mark.parametrize("exercise", ["elementwise", "reductions", "softmax", "rmsnorm",
                                      "softmax_backward", "online_softmax", "matmul"])
def test_the_reference_maps_like_itself_in_every_kernel_exercise(interpreter, tmp_path,
                                                                  exercise):
    """The worker run a check uses: the reference as the learner gives the reference's map."""
    write_module(tmp_path, exercise, solution_text(exercise))
    entry = registry.find(exercise)
    part, case = next((p.name, c.name) for p in entry.parts if p.needs_kernels
                      for c in p.cases if memory_map.small_enough(c))
    pair = map_run.record_map(entry, tmp_path / f"{exercise}.py", part, case)
    assert pair.learner is not None and pair.reference is not None, pair.note
    assert pair.learner.accesses, "no access was recorded"
    for label in pair.labels():
        for kind in ("store", "load"):
            assert pair.learner.grid(label, kind) == pair.reference.grid(label, kind)
    assert pair.learner.never("output", "store") == []
    text = map_view.plain(pair, 80)
    assert all(len(line) <= 80 for line in text.splitlines())


WRONG_SOFTMAX = solution_text("softmax").replace(
    "row * input_row_stride", "row * BLOCK").replace("row * output_row_stride", "row * BLOCK")


def test_check_draws_the_first_failing_small_case_beside_the_reference(
        interpreter, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    write_module(tmp_path, "softmax", WRONG_SOFTMAX)
    code = check.main(["softmax", "--root", str(tmp_path), "--part", "triton"])
    out = capsys.readouterr().out
    assert code == 1
    assert "Memory map of case 'width 17, five rows'" in out
    lines = out.splitlines()
    assert all(len(line) <= 80 for line in lines)
    assert "    1 ...............11   11111111111111111" in lines
    assert "    6 !!!!!!!!!!!" in lines  # program 3's load, where rows 5 and 6 would be
    _assert_aligned(lines)
    assert out.count("Memory map of case") == 1


def _softmax_with(old: str, new: str) -> str:
    text = solution_text("softmax")
    assert text.count(old) == 1, old
    return text.replace(old, new)


# Mistakes that raise before the learner's code loads or stores anything: (the reference's
# text, the mistake, what the one line says the code did).
RAISED_BEFORE_ANY_ACCESS = {
    "a NameError in the launcher": ("triton.next_power_of_2(n_cols)",
                                    "triton.next_power_of_2(n_colz)",
                                    "raised NameError before launching a kernel"),
    "a kernel that fails as it is traced": (
        "    row = tl.program_id(0)\n",
        "    row = tl.program_id(0)\n    tl.static_assert(BLOCK < 0, 'made up')\n",
        "raised AssertionError before any load or store"),
    "a bad keyword to tl.load": ('other=-float("inf"))', 'other=-float("inf"), masc=mask)',
                                 "raised TypeError before any load or store"),
}


# a bad keyword and a failed trace both raise inside the kernel before any access, and get the
# same sentence: the quick run takes the trace, the keyword is exhaustive
@pytest.mark.parametrize("mistake", [
    pytest.param(m, marks=pytest.mark.exhaustive) if m == "a bad keyword to tl.load" else m
    for m in sorted(RAISED_BEFORE_ANY_ACCESS)])
def test_a_case_that_raised_before_any_load_or_store_gets_no_map(
        interpreter, tmp_path, capsys, monkeypatch, mistake):
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.setenv("NO_COLOR", "1")
    old, wrong, observed = RAISED_BEFORE_ANY_ACCESS[mistake]
    write_module(tmp_path, "softmax", _softmax_with(old, wrong))
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "triton"]) == 1
    out = capsys.readouterr().out
    assert f"  No memory map of case 'width 3': in Triton's interpreter your code {observed}, " \
           "so there is nothing to map.\n" in out
    assert "Memory map of case" not in out and "which program stored" not in out
    assert "Key:" not in out


def test_json_has_no_map_where_the_check_draws_none(interpreter, tmp_path, capsys):
    old, wrong, observed = RAISED_BEFORE_ANY_ACCESS["a NameError in the launcher"]
    write_module(tmp_path, "softmax", _softmax_with(old, wrong))
    check.main(["softmax", "--root", str(tmp_path), "--part", "triton", "--json",
                "--map", "width 17, five rows"])
    drawn = json.loads(capsys.readouterr().out)["memory_map"]
    assert (drawn["case"], drawn["asked"]) == ("width 17, five rows", True)
    assert drawn["learner"] is None and drawn["reference"] is None
    assert drawn["note"] == f"in Triton's interpreter your code {observed}, so there is " \
                            "nothing to map"


# Failures a map cannot locate, as (the reference's text, the mistake, the one sentence said
# instead): a map of either would be two pictures alike but for the program that stopped.
NOTHING_TO_LOCATE = {
    "a NameError in the kernel, after its load": (
        "    maximum = tl.max(x, axis=0)\n", "    maximum = tl.max(xx, axis=0)\n",
        "your kernel stopped on its NameError in program 0, before storing anything, having "
        "read only what the reference reads"),
    "values off by a little everywhere": (
        "    output = numerator / denominator\n",
        "    output = numerator / denominator * 1.001\n",
        "your kernel read and wrote every element just as the reference kernel does: what "
        "differs is what it stored"),
}


def test_a_case_that_stopped_in_the_check_and_not_when_mapped_is_not_described_by_the_map(
        interpreter, tmp_path, capsys, monkeypatch):
    # code that raises on its first call ever (a mark left in a file says it was made): the
    # check's first case is an error, the map's run of it ends normally, and touches memory as
    # the reference does; to say "what differs is what it stored" would describe a run that
    # is not the graded one
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    mark = tmp_path / "called-once"
    write_module(tmp_path, "softmax", solution_text("softmax") + f"""

_softmax_triton = softmax_triton


def softmax_triton(x):
    import os
    if not os.path.exists({str(mark)!r}):
        open({str(mark)!r}, "w").close()
        raise RuntimeError("the first call")
    return _softmax_triton(x)
""")
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "triton"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "RuntimeError" in out
    assert "what differs is what it stored" not in out
    assert "run again to record it, your code ran to its end, where in the check it stopped" \
        in out, out


# the quick run wraps the NameError's sentence (said nowhere else); the sentence for values
# off everywhere is exhaustive here, and quick in test_json_says_what_was_seen_where_no_map_is_drawn
@pytest.mark.parametrize("mistake", [
    pytest.param(m, marks=pytest.mark.exhaustive) if m == "values off by a little everywhere"
    else m for m in sorted(NOTHING_TO_LOCATE)])
def test_a_failure_the_map_cannot_locate_is_said_in_two_lines_not_drawn(
        interpreter, tmp_path, capsys, monkeypatch, mistake):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    old, wrong, observed = NOTHING_TO_LOCATE[mistake]
    write_module(tmp_path, "softmax", _softmax_with(old, wrong))
    assert check.main(["softmax", "--root", str(tmp_path), "--part", "triton"]) == 1
    out = capsys.readouterr().out
    sentence = f"No memory map of case 'width 3': {observed}."
    assert f"\n  {sentence[:60]}" in out and sentence in " ".join(out.split())
    assert len(textwrap.wrap(sentence, 80 - 2)) <= 2  # as check wraps it, two lines
    assert "Memory map of case" not in out and "Key:" not in out
    # Asked for by name, the map is drawn all the same, and JSON carries it.
    check.main(["softmax", "--root", str(tmp_path), "--part", "triton", "--json",
                "--map", "width 3"])
    drawn = json.loads(capsys.readouterr().out)["memory_map"]
    assert drawn["learner"] is not None and drawn["note"] is None


def test_json_says_what_was_seen_where_no_map_is_drawn(interpreter, tmp_path, capsys):
    old, wrong, observed = NOTHING_TO_LOCATE["values off by a little everywhere"]
    write_module(tmp_path, "softmax", _softmax_with(old, wrong))
    check.main(["softmax", "--root", str(tmp_path), "--part", "triton", "--json"])
    drawn = json.loads(capsys.readouterr().out)["memory_map"]
    assert (drawn["case"], drawn["learner"], drawn["note"]) == ("width 3", None, observed)


@pytest.mark.parametrize("call", ["raises first", "launches no program"])
def test_the_drawing_of_a_call_without_loads_or_stores_is_one_line(interpreter, call):
    copy = _kernels()["copy_rows"]
    launch, observed = {
        "raises first": (lambda x: n_colz,  # noqa: F821 - the learner's misspelling
                         "raised NameError before launching a kernel"),
        "launches no program": (_rows(copy, programs=lambda rows: 0),
                                "launched copy_rows on a grid of (0,): no program ran"),
    }[call]
    pair = memory_map.MemoryMap("softmax", "triton", "made up", _record(launch, _matrix(2, 3)),
                                _record(_rows(copy), _matrix(2, 3)))
    assert map_view.plain(pair, 200) == "  No memory map of case 'made up': in Triton's " \
        f"interpreter your code {observed}, so there is nothing to map."


def test_a_map_cut_short_by_another_error_does_not_call_an_access_refused(interpreter):
    """Only the bounds check refuses an access: after any other error the map is still
    drawn (the code touched memory first), without saying that one was refused."""
    import triton
    import triton.language as tl

    @triton.jit
    def misspelt(out_ptr, n, BLOCK: tl.constexpr):
        lanes = tl.arange(0, BLOCK)
        tl.store(out_ptr + lanes, 0.0, masc=lanes < n)

    copy = _rows(_kernels()["copy_rows"])

    def copy_then_misspelt(x):
        out = copy(x)
        misspelt[(1,)](out, x.numel(), BLOCK=128)
        return out

    pair = memory_map.MemoryMap("softmax", "triton", "made up",
                                _record(copy_then_misspelt, _matrix(5, 17)),
                                _record(copy, _matrix(5, 17)))
    text = " ".join(map_view.plain(pair, 80).split())
    assert "Memory map of case 'made up'" in text
    assert "Your kernel stopped in program 4 (TypeError" in text
    assert "the map shows its accesses up to there." in text and "refused" not in text


def test_check_map_draws_a_named_case_and_json_carries_it(interpreter, tmp_path, capsys):
    write_module(tmp_path, "softmax", solution_text("softmax"))
    code = check.main(["softmax", "--root", str(tmp_path), "--part", "triton", "--json",
                       "--map", "many rows"])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    drawn = document["memory_map"]
    assert (drawn["part"], drawn["case"], drawn["asked"]) == ("triton", "many rows", True)
    output = next(t for t in drawn["learner"]["tensors"] if t["label"] == "output")
    assert output["shape"] == [37, 33]
    assert output["stores"]["programs"][36][32] == [36]
    assert output["stores"]["outside_count"] == 0
    assert drawn["learner"]["tensors"] == drawn["reference"]["tensors"]


def test_check_map_with_a_bad_case_name_lists_the_cases_in_one_line(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "1000")
    code = check.main(["softmax", "--map", "no such case"])
    out = capsys.readouterr().out
    assert code == 2
    assert len(out.strip().splitlines()) == 1
    assert "has no kernel case 'no such case'" in out
    assert "'width 3'" in out and "'many rows'" in out and "'bfloat16'" not in out


def test_a_terminal_gets_a_colour_per_program_and_a_pipe_the_same_characters(interpreter):
    from rich.console import Console

    kernels = _kernels()
    pair = memory_map.MemoryMap(
        "softmax", "triton", "made up",
        _record(_rows(kernels["row_offset_from_block"]), _matrix(5, 17)),
        _record(_rows(kernels["copy_rows"]), _matrix(5, 17)))
    shown = {}
    for name, options in (("terminal", {"force_terminal": True, "color_system": "standard"}),
                          ("pipe", {"force_terminal": False})):
        stream = io.StringIO()
        map_view.render(Console(file=stream, width=80, **options), pair)
        shown[name] = stream.getvalue()
    assert "\x1b[" in shown["terminal"] and "\x1b[" not in shown["pipe"]
    assert re.sub(r"\x1b\[[0-9;]*m", "", shown["terminal"]) == shown["pipe"]


def test_lesson_06_shows_the_map_the_course_computes():
    lesson = Path(__file__).resolve().parent.parent / "lessons" / "06-first-kernel.md"
    text = lesson.read_text(encoding="utf-8")
    assert "<!-- computed: memory_map store_without_mask 10,4 -->" in text
    assert computed.refresh(text) == text, "run python -m learning.computed"
    assert "    0 0000111122!!   0000111122" in text


def test_without_a_warm_process_check_names_the_command_instead_of_starting_torch_again(
        interpreter, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setattr(map_run, "_forked_workers", lambda: False)
    write_module(tmp_path, "softmax", WRONG_SOFTMAX)
    check.main(["softmax", "--root", str(tmp_path), "--part", "triton"])
    out = " ".join(capsys.readouterr().out.split())
    assert "python -m learning.check softmax --map 'width 17, five rows' draws" in out
    assert "Memory map of case" not in out


def test_an_output_of_another_shape_is_not_drawn_in_the_references_grid(interpreter, tmp_path,
                                                                       capsys, monkeypatch):
    # return c.T: the learner's output is 64 x 45 and the reference's 45 x 64; drawn in one grid,
    # the reference's stores would be scrambled into the learner's shape
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    text = solution_text("matmul").replace("BLOCK_K=block_k)\n    return c\n",
                                           "BLOCK_K=block_k)\n    return c.T\n")
    assert "return c.T" in text
    write_module(tmp_path, "matmul", text)
    check.main(["matmul", "--root", str(tmp_path), "--part", "triton", "--map", "wide and short"])
    out = " ".join(capsys.readouterr().out.split())
    assert "not drawn, its shapes differ" in out, out[-2000:]


def test_a_case_whose_output_is_not_the_kernels_is_not_mapped_unasked():
    # a launcher that returns its input: the map of "the output" would be the input, drawn as
    # a tensor no kernel stored to, while the kernel stored every value into another
    from types import SimpleNamespace

    from learning.grader import compare, registry
    from learning.grader import memory_map as maps

    part = registry.find("elementwise").part("triton")
    case = next(c for c in part.cases if maps.small_enough(c))

    def result_with(key):
        verdict = compare.Verdict("failed", "the output shares memory with the input",
                                  causes=(compare.COMMON_BUGS[key],))
        return SimpleNamespace(parts=[SimpleNamespace(
            part=part, problem=None, cases=[SimpleNamespace(name=case.name, verdict=verdict)])])

    assert maps.first_failing(result_with("aliases-input")) is None
    assert maps.first_failing(result_with("computed-by-torch")) is None
    assert maps.first_failing(result_with("out-of-bounds")) == ("triton", case.name)


def test_a_call_that_raised_in_its_second_kernel_is_not_mapped_against_another_tensor(
        interpreter, tmp_path, capsys, monkeypatch):
    # the dQ kernel (the second) raises as it is traced; the first stored dK and dV, each a
    # third of the reference's stacked output: no tensor of the learner's is that output
    monkeypatch.setenv("COLUMNS", "80")
    monkeypatch.setenv("NO_COLOR", "1")
    text = solution_text("attention_backward")
    sums = "delta = tl.sum(do.to(tl.float32) * o.to(tl.float32), axis=1)"
    assert text.count(sums) == 2
    first, second = text.rsplit(sums, 1)
    write_module(tmp_path, "attention_backward",
                 first + sums.replace("axis=1", "dim=1") + second)
    assert check.main(["attention_backward", "--root", str(tmp_path), "--part", "triton"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "TypeError" in out
    assert "your code stopped on its TypeError before it returned an output" in out, out
    assert "its shapes differ" not in out and "Memory map of case" not in out


@pytest.mark.parametrize("returned", ["out[:1].expand(2 ** 40)", "out.to_sparse()"])
def test_an_output_no_map_can_hold_is_left_out_of_the_map_not_a_failure_of_the_grader(
        interpreter, tmp_path, capsys, monkeypatch, returned):
    # an expanded view of 2**40 elements asked the map for terabytes, a sparse tensor has no
    # storage to read: the map run died with the grader's own error
    monkeypatch.setenv("COLUMNS", "80")
    text = solution_text("elementwise")
    before, after = text.rsplit("    return out\n", 1)  # the launcher's, the last
    write_module(tmp_path, "elementwise", before + f"    return {returned}\n" + after)
    assert check.main(["elementwise", "--root", str(tmp_path), "--part", "triton"]) == 1
    out = " ".join(capsys.readouterr().out.split())
    assert "FAIL" in out
    assert "grader's own code failed" not in out and "Traceback" not in out, out
