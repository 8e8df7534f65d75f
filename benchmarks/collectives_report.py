"""Reports bench_collectives_torch.py results: per op and file, the crossover (the smallest size
from which the symmetric path beat the regular one at every larger size), and one SVG per op,
microseconds per call against bytes (both on log scales), one line per path. With several CSV
files (an NCCL_SYM_CTAS sweep) the regular and torch lines come from the first file and there is
one symmetric line per file.

    python3 benchmarks/collectives_report.py OUT_DIR results.csv [more.csv ...]

Plain SVG written by hand: no plotting library is needed on the GPU host or in CI.
"""

from __future__ import annotations

import csv
import math
import os
import sys
from typing import Iterable, Optional

WIDTH, HEIGHT = 720, 440
LEFT, RIGHT, TOP, BOTTOM = 80, 190, 40, 60
COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2",
           "#7f7f7f", "#bcbd22", "#17becf"]


def crossover(rows: list[dict]) -> str:
    """The smallest size from which symmetric_us < regular_us at every larger size measured."""
    faster_from: Optional[int] = None
    smallest = min(int(r["bytes"]) for r in rows)
    for row in sorted(rows, key=lambda r: int(r["bytes"])):
        if float(row["symmetric_us"]) < float(row["regular_us"]):
            faster_from = int(row["bytes"]) if faster_from is None else faster_from
        else:
            faster_from = None
    if faster_from is None:
        return "never faster"
    if faster_from == smallest:
        return "faster at every size"
    return f"faster from {faster_from} bytes"


def read_rows(paths: Iterable[str]) -> list[tuple[str, list[dict]]]:
    """(label, rows) per file; the label names the NCCL_SYM_CTAS setting of the run."""
    out = []
    for path in paths:
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        ctas = rows[0]["sym_ctas"] if rows else ""
        out.append((f"NCCL_SYM_CTAS={ctas or 'unset'}", rows))
    return out


def series_for(op: str, runs: list[tuple[str, list[dict]]]) -> list[tuple[str, list]]:
    """(legend, [(bytes, us), ...]) lines for one op."""
    first = [r for r in runs[0][1] if r["op"] == op]
    lines = [("groupcoord regular", [(int(r["bytes"]), float(r["regular_us"])) for r in first]),
             ("torch.distributed", [(int(r["bytes"]), float(r["torch_us"])) for r in first])]
    for label, rows in runs:
        mine = [r for r in rows if r["op"] == op]
        name = "groupcoord symmetric" + (f" {label}" if len(runs) > 1 else "")
        lines.append((name, [(int(r["bytes"]), float(r["symmetric_us"])) for r in mine]))
    return [(name, points) for name, points in lines if points]


def _scale(lo: float, hi: float, size: int, flip: bool):
    lo, hi = math.log10(lo), math.log10(hi)
    span = hi - lo or 1.0

    def to_pixel(value: float) -> float:
        fraction = (math.log10(value) - lo) / span
        return (1 - fraction if flip else fraction) * size

    return to_pixel


def _size_label(n: float) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= factor:
            return f"{n / factor:g} {unit}"
    return f"{n:g} B"


def svg_plot(title: str, lines: list[tuple[str, list]]) -> str:
    xs = [x for _, points in lines for x, _ in points]
    ys = [y for _, points in lines for _, y in points if y > 0]
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    x_of = _scale(min(xs), max(xs), plot_w, flip=False)
    y_lo, y_hi = 10 ** math.floor(math.log10(min(ys))), 10 ** math.ceil(math.log10(max(ys)))
    y_of = _scale(y_lo, y_hi, plot_h, flip=True)
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
             f'font-family="sans-serif" font-size="12">',
             f'<rect width="{WIDTH}" height="{HEIGHT}" fill="white"/>',
             f'<text x="{LEFT}" y="24" font-size="15">{title}</text>',
             f'<g transform="translate({LEFT},{TOP})">',
             f'<rect width="{plot_w}" height="{plot_h}" fill="none" stroke="#444"/>']
    decade = y_lo
    while decade <= y_hi * 1.0001:
        y = y_of(decade)
        parts.append(f'<line x1="0" x2="{plot_w}" y1="{y:.1f}" y2="{y:.1f}" stroke="#ddd"/>')
        parts.append(f'<text x="-6" y="{y + 4:.1f}" text-anchor="end">{decade:g}</text>')
        decade *= 10
    for x_value in sorted(set(xs)):
        x = x_of(x_value)
        parts.append(f'<text x="{x:.1f}" y="{plot_h + 16}" text-anchor="middle" '
                     f'font-size="10">{_size_label(x_value)}</text>')
    parts.append(f'<text x="{plot_w / 2}" y="{plot_h + 40}" text-anchor="middle">bytes</text>')
    parts.append(f'<text transform="translate(-60,{plot_h / 2}) rotate(-90)" '
                 f'text-anchor="middle">microseconds per call</text>')
    for i, (name, points) in enumerate(lines):
        colour = COLOURS[i % len(COLOURS)]
        coords = " ".join(f"{x_of(x):.1f},{y_of(y):.1f}" for x, y in sorted(points) if y > 0)
        parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="2" '
                     f'points="{coords}"/>')
        legend_y = 10 + 18 * i
        parts.append(f'<line x1="{plot_w + 12}" x2="{plot_w + 32}" y1="{legend_y}" '
                     f'y2="{legend_y}" stroke="{colour}" stroke-width="2"/>')
        parts.append(f'<text x="{plot_w + 36}" y="{legend_y + 4}" font-size="10">{name}</text>')
    parts.append("</g></svg>")
    return "\n".join(parts) + "\n"


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    out_dir, paths = argv[1], argv[2:]
    runs = read_rows(paths)
    os.makedirs(out_dir, exist_ok=True)
    for label, rows in runs:
        for op in dict.fromkeys(r["op"] for r in rows):
            print(f"crossover {op} ({label}): symmetric vs regular: "
                  f"{crossover([r for r in rows if r['op'] == op])}")
    world = runs[0][1][0]["world_size"] if runs[0][1] else "?"
    written = []
    for op in dict.fromkeys(r["op"] for r in runs[0][1]):
        lines = series_for(op, runs)
        path = os.path.join(out_dir, f"{op}.svg")
        with open(path, "w") as f:
            f.write(svg_plot(f"{op}, bf16, {world} ranks", lines))
        written.append(path)
    print("wrote " + ", ".join(written))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
