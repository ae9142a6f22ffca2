"""Lesson 12's tables of what was tried for 1000 cubed and the decoding step: each keeps the
fastest row of each kind beside torch.matmul from the same run, says why a row has no time,
and says where its figures would be when a probe's results are not committed."""

from __future__ import annotations

import json

from learning.computed import to_markdown
from learning.exercises.matmul import explainer

ENV = {"date": "2026-12-06", "device": "NVIDIA H100 80GB HBM3", "torch": "2.11.0",
       "triton": "3.6.0"}


def timed(run, times, dtype="fp16", size=1000):
    return [{"size": size, "dtype": dtype, "run": run, "round": i, "device_us": t}
            for i, t in enumerate(times)]


def write(folder, name, rows, **extra):
    (folder / name).write_text(json.dumps({"env": ENV, "command": f"python {name}",
                                           "rows": rows, **extra}), encoding="utf-8")


def small_results(folder, cluster_rows):
    write(folder, "matmul_cluster.json", cluster_rows)
    write(folder, "matmul_cluster_h100.json", timed("torch.matmul", [9.0, 9.0]))
    write(folder, "matmul_specialize_h100.json", timed("torch.matmul", [9.0]))
    write(folder, "matmul_copy_inside_h100.json", timed("torch.matmul", [9.0]))


def test_the_small_table_keeps_the_fastest_of_each_kind_and_says_why_a_row_failed(tmp_path):
    small_results(tmp_path, [
        *timed("torch.matmul", [8.0, 8.2, 7.9]),
        *timed("64x128x128 group 8, tensor descriptors", [10.0, 10.2, 10.1]),
        *timed("128x128x64 group 8, tensor descriptors", [12.0, 12.5, 12.1]),
        *timed("128x128x64 group 8, clusters of 2", [11.0, 11.1, 11.2]),
        *timed("64x128x64 group 8, 5 stages", [9.0], size=1024),  # another product: left out
        {"size": 1000, "dtype": "fp16", "run": "256x128x64 group 8, clusters of 4",
         "note": "AssertionError: error 1.00e+00"},
    ])
    table = to_markdown(explainer.small_tried(results=tmp_path))
    assert "| H100 | fp16 | torch.matmul |  | 8.00 | 7.90 to 8.20 | 1.00 |" in table
    assert "| one CTA per program | 64x128x128 group 8, tensor descriptors | 10.10 |" in table
    assert "12.10" not in table  # the slower row of the same kind
    assert "| clusters of 2 CTAs | 128x128x64 group 8, clusters of 2 | 11.10 |" in table
    assert "clusters of 4 CTAs: wrong answer (relative error 1.00e+00)" in table
    assert "5 stages" not in table  # timed at 1024 cubed
    # torch.matmul / the row, in the same run
    assert f"| {8.0 / 10.1:.2f} |" in table


def test_the_small_table_says_which_result_is_missing(tmp_path):
    small_results(tmp_path, timed("torch.matmul", [8.0]))
    (tmp_path / "matmul_specialize_h100.json").unlink()
    said = explainer.small_tried(results=tmp_path)
    assert "Not measured: lab/results/matmul_specialize_h100.json is not committed" in said.text
    assert "python lab/probes/matmul_specialize_probe.py" in said.text


def test_the_decode_table_groups_rows_by_strip_width_and_names_the_choice(tmp_path):
    def decode(run, us):
        return [{"dtype": "bf16", "run": run, "round": i, "device_us": us,
                 "share_of_ceiling": 0.5 * 12.0 / us} for i in range(3)]

    path = tmp_path / "matmul_decode.json"
    write(tmp_path, path.name, [
        *decode("torch.matmul", 14.0), *decode("reference (chosen)", 12.5),
        *decode("16x32x128 group 1, 4 warps, 6 stages", 12.0),
        *decode("16x32x256 group 1, 4 warps, 4 stages", 13.0),
        *decode("16x128x128 group 1, 4 warps, 4 stages, K split in 4", 15.0),
        {"dtype": "bf16", "chosen": "TileConfig(block_m=16, block_n=32, block_k=256, group_m=1, "
         "num_warps=2, num_stages=6, split_k=1, tma=True, persistent=False, "
         "copy_inside=False, cluster=1)"},
    ], product=[8, 4096, 4096], copy_ceiling_gbps=4200.0)
    table = to_markdown(explainer.decode_tried(path=path))
    assert "| bf16 | strips of 32 columns | 16x32x128 group 1, 4 warps, 6 stages | 12.00 |" in table
    assert "13.00" not in table
    assert "| strips of 128 columns K split | 16x128x128" in table
    assert "| reference (chosen) | 16x32x256 group 1, 2 warps, 6 stages, tensor descriptors |" \
        in table
    assert f"| {14.0 / 15.0:.2f} | 0.40 |" in table  # torch / it, and its share of the ceiling
    assert "4,200 GB/s" in table
    assert "Not measured" in explainer.decode_tried(path=tmp_path / "absent.json").text
