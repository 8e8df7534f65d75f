"""benchmarks/collectives_report.py: the crossover it reports and the plots it writes."""

from __future__ import annotations

import csv
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import pytest

import collectives_report as report

FIELDS = ["op", "bytes", "world_size", "sym_ctas", "regular_us", "symmetric_us", "torch_us",
          "symmetric_calls", "calls"]


def rows(op: str, timings: list[tuple[int, float, float]], ctas: str = "") -> list[dict]:
    """Rows of one op: (bytes, regular_us, symmetric_us), torch a fixed 10 us."""
    return [{"op": op, "bytes": b, "world_size": 2, "sym_ctas": ctas, "regular_us": reg,
             "symmetric_us": sym, "torch_us": 10.0, "symmetric_calls": 23, "calls": 23}
            for b, reg, sym in timings]


def write_csv(path: Path, data: list[dict]) -> Path:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        writer.writeheader()
        writer.writerows(data)
    return path


@pytest.mark.parametrize("timings, expected", [
    ([(1024, 5, 6), (4096, 6, 7)], "never faster"),
    ([(1024, 5, 4), (4096, 6, 5)], "faster at every size"),
    ([(1024, 5, 6), (4096, 6, 5), (16384, 9, 7)], "faster from 4096 bytes"),
    # A win below a loss does not count: the crossover is where it stays faster.
    ([(1024, 5, 4), (4096, 6, 7), (16384, 9, 7), (65536, 20, 12)], "faster from 16384 bytes"),
    ([(1024, 5, 4), (4096, 6, 7)], "never faster"),
])
def test_crossover(timings, expected):
    assert report.crossover(rows("all_gather", timings)) == expected


def test_crossover_reads_csv_strings(tmp_path):
    path = write_csv(tmp_path / "r.csv", rows("all_reduce", [(4096, 6, 5), (1024, 5, 6)]))
    (_, data), = report.read_rows([str(path)])
    assert report.crossover(data) == "faster from 4096 bytes"


def polylines(svg: Path) -> list[ElementTree.Element]:
    root = ElementTree.parse(svg).getroot()  # well-formed XML, or this raises
    return [e for e in root.iter() if e.tag.endswith("polyline")]


def test_one_plot_per_op_with_a_line_per_path(tmp_path, capsys):
    data = (rows("all_gather", [(1024, 5, 6), (4096, 6, 5), (1 << 20, 90, 60)])
            + rows("all_reduce", [(1024, 7, 6), (4096, 8, 7)]))
    path = write_csv(tmp_path / "r.csv", data)
    assert report.main(["report", str(tmp_path / "plots"), str(path)]) == 0
    printed = capsys.readouterr().out
    assert "crossover all_gather (NCCL_SYM_CTAS=unset): symmetric vs regular: faster from 4096" \
        in printed
    assert "crossover all_reduce (NCCL_SYM_CTAS=unset): symmetric vs regular: faster at every" \
        in printed
    assert sorted(p.name for p in (tmp_path / "plots").iterdir()) == ["all_gather.svg",
                                                                      "all_reduce.svg"]
    lines = polylines(tmp_path / "plots" / "all_gather.svg")
    assert len(lines) == 3  # regular, torch.distributed, symmetric
    assert all(len(line.get("points").split()) == 3 for line in lines)
    width = report.WIDTH - report.LEFT - report.RIGHT
    height = report.HEIGHT - report.TOP - report.BOTTOM
    for line in lines:  # inside the frame
        for point in line.get("points").split():
            x, y = map(float, point.split(","))
            assert 0 <= x <= width and 0 <= y <= height, point
    text = (tmp_path / "plots" / "all_gather.svg").read_text()
    assert "1 MiB" in text and "torch.distributed" in text


def test_a_sweep_adds_one_symmetric_line_per_file(tmp_path):
    files = [write_csv(tmp_path / f"c{c}.csv",
                       rows("reduce_scatter", [(1024, 5, 4 + c), (4096, 6, 5 + c)], str(c)))
             for c in (1, 2, 4)]
    assert report.main(["report", str(tmp_path / "plots")] + [str(f) for f in files]) == 0
    svg = tmp_path / "plots" / "reduce_scatter.svg"
    assert len(polylines(svg)) == 2 + 3
    assert "NCCL_SYM_CTAS=4" in svg.read_text()


def test_usage_without_files(capsys):
    assert report.main(["report", "out"]) == 2
    assert "OUT_DIR" in capsys.readouterr().err
