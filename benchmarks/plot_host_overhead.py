#!/usr/bin/env python3
"""Plot of a bench_host_overhead --json file: host time per call of each CUDA op, groupcoord
against raw NCCL on the same communicator, one panel per message size.

    /usr/bin/python3 benchmarks/plot_host_overhead.py host-np1.json \\
        --out docs/benchmarks/host_overhead/host_np1.png --title "H200, 1 rank"

Bars: `raw` (ncclAllReduce & co. called directly) and `comm` (GroupCoordinator's device
communicator, the path an engine takes), with the difference in µs printed at the end of each
pair. Needs matplotlib (Debian: apt-get install -y python3-matplotlib); uses the Agg backend.
"""
import argparse
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PATHS = {"raw": ("raw NCCL", "tab:gray"), "comm": ("groupcoord", "tab:blue")}


def load(path):
    with open(path) as f:
        data = json.load(f)
    table = {}
    for row in data["rows"]:
        # A graph replay's time is per replay of 100 calls: another scale, left out here.
        if row["path"] in PATHS and "graph" not in row["op"]:
            table.setdefault(row["size"], {}).setdefault(row["op"], {})[row["path"]] = row["us"]
    return data, table


def plot(data, table, out, title):
    sizes = list(table)
    fig, axes = plt.subplots(1, len(sizes), figsize=(5.2 * len(sizes), 5.5))
    if len(sizes) == 1:
        axes = [axes]
    for ax, size in zip(axes, sizes):
        ops = [op for op in table[size] if all(p in table[size][op] for p in PATHS)]
        for i, (path, (label, color)) in enumerate(PATHS.items()):
            values = [table[size][op][path] for op in ops]
            ax.barh([y + 0.38 * i for y in range(len(ops))], values, height=0.38, color=color,
                    label=label)
        for y, op in enumerate(ops):
            diff = table[size][op]["comm"] - table[size][op]["raw"]
            ax.text(table[size][op]["comm"] + 0.05, y + 0.38, f"{diff:+.2f}", va="center",
                    fontsize=8)
        ax.set_yticks([y + 0.19 for y in range(len(ops))], ops, fontsize=8)
        ax.invert_yaxis()
        ax.set_title(size)
        ax.set_xlabel("host µs per call (median)")
        ax.grid(axis="x", alpha=0.3)
    axes[0].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{title}: {data['world_size']} rank(s), NCCL {data['nccl_version']}, "
                 f"median of {data['rounds']} rounds of {data['calls']} calls")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"wrote {out}")


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("json")
    parser.add_argument("--out", required=True)
    parser.add_argument("--title", default="bench_host_overhead")
    args = parser.parse_args(argv)
    data, table = load(args.json)
    if not table:
        print(f"{args.json}: no raw/comm rows", file=sys.stderr)
        return 1
    plot(data, table, args.out, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
