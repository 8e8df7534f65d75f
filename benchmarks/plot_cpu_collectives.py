#!/usr/bin/env python3
"""Plots of bench_cpu_collectives --json files: latency vs size and busbw vs size, one figure per
op and world size, one line per path (and per file label when several files share a world size).

    /usr/bin/python3 benchmarks/plot_cpu_collectives.py run-np2.json run-np4.json \
        --out docs/benchmarks/

writes cpu_<op>_np<N>.png (two panels: time per call, busbw) under --out. A file may be given as
LABEL=PATH (e.g. before=a.json after=b.json) to compare runs of the same world size; the label
then prefixes the line names and goes into the title. --markdown also prints one Markdown table
per file and op (time per call in µs with busbw in GB/s, checks, ratios) to stdout.

Needs matplotlib (Debian: apt-get install -y python3-matplotlib); uses the Agg backend.
"""
import argparse
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PATH_TITLES = {
    "groupcoord": "groupcoord",
    "groupcoord_out": "groupcoord (out=)",
    "gloo": "raw Gloo",
    "mpi": "Open MPI",
}
PATH_STYLE = {
    "groupcoord": dict(color="tab:blue", marker="o"),
    "groupcoord_out": dict(color="tab:cyan", marker="s"),
    "gloo": dict(color="tab:orange", marker="^"),
    "mpi": dict(color="tab:green", marker="D"),
}
LABEL_STYLES = ["-", "--", ":", "-."]
OP_TITLES = {"all_reduce": "all_reduce (sum)", "all_gather": "all_gather", "broadcast": "broadcast"}


def human_bytes(b):
    for unit, scale in (("G", 1 << 30), ("M", 1 << 20), ("K", 1 << 10)):
        if b >= scale:
            v = b / scale
            return f"{v:g}{unit}"
    return f"{b:g}"


def fmt_num(v):
    """2 decimals below 10, 1 below 100, whole numbers (thousands separated) above."""
    if v < 10:
        return f"{v:.2f}"
    if v < 100:
        return f"{v:.1f}"
    return f"{v:,.0f}"


def markdown_tables(label, data):
    """One Markdown table per op of one run: 'µs (busbw GB/s)' per path, checks, ratios."""
    n = data["world_size"]
    out = []
    ops = []
    for r in data["results"]:
        if r["op"] not in ops:
            ops.append(r["op"])
    for op in ops:
        rows = [r for r in data["results"] if r["op"] == op]
        paths = []
        for r in rows:
            if r["path"] not in paths:
                paths.append(r["path"])
        by = {(r["bytes"], r["path"]): r for r in rows}
        sizes = sorted({r["bytes"] for r in rows})
        head = f"{OP_TITLES.get(op, op)}, {n} ranks" + (f" ({label})" if label else "")
        out.append(f"**{head}**: µs per call (busbw GB/s)\n")
        cols = ["size", "count"] + [PATH_TITLES.get(p, p) for p in paths]
        cols += ["check", "ours/MPI", "Gloo/ours", "other"]
        out.append("| " + " | ".join(cols) + " |")
        out.append("|" + "|".join(["---:"] * len(cols)) + "|")
        for b in sizes:
            cells = [human_bytes(b), str(by[(b, paths[0])]["count"])]
            ok = True
            for p in paths:
                r = by.get((b, p))
                if r is None:
                    cells.append("")
                    continue
                ok = ok and r["ok"]
                cells.append(f"{fmt_num(r['time_us'])} ({r['busbw_gbs']:.3f})")
            cells.append("ok" if ok else "WRONG")
            ours, mpi, gloo = by.get((b, "groupcoord")), by.get((b, "mpi")), by.get((b, "gloo"))
            cells.append(fmt_num(ours["time_us"] / mpi["time_us"]) if ours and mpi else "n/a")
            cells.append(fmt_num(gloo["time_us"] / ours["time_us"]) if ours and gloo else "n/a")
            other = by[(b, paths[0])].get("other_cores")
            cells.append(f"{other:.2f}" if other is not None else "")
            out.append("| " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def load(spec):
    label, _, path = spec.rpartition("=")
    with open(path) as f:
        data = json.load(f)
    return label, data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("json", nargs="+", help="bench_cpu_collectives --json output ([LABEL=]PATH)")
    ap.add_argument("--out", required=True, help="folder for the PNG files")
    ap.add_argument("--prefix", default="cpu", help="file name prefix (default: cpu)")
    ap.add_argument("--markdown", action="store_true", help="also print Markdown tables")
    args = ap.parse_args(argv)

    runs = [load(spec) for spec in args.json]
    if args.markdown:
        for label, data in runs:
            print(markdown_tables(label, data))
    os.makedirs(args.out, exist_ok=True)
    # (op, world_size) -> [(label, data)]
    groups = {}
    for label, data in runs:
        ops = []
        for r in data["results"]:
            if r["op"] not in ops:
                ops.append(r["op"])
        for op in ops:
            groups.setdefault((op, data["world_size"]), []).append((label, data))

    written = []
    for (op, n), members in sorted(groups.items()):
        fig, (ax_t, ax_b) = plt.subplots(1, 2, figsize=(13, 5))
        labels = []
        for li, (label, data) in enumerate(members):
            if label:
                labels.append(label)
            paths = []
            for r in data["results"]:
                if r["op"] == op and r["path"] not in paths:
                    paths.append(r["path"])
            for path in paths:
                rows = sorted((r for r in data["results"] if r["op"] == op and r["path"] == path),
                              key=lambda r: r["bytes"])
                x = [r["bytes"] for r in rows]
                name = PATH_TITLES.get(path, path)
                if label:
                    name = f"{label}: {name}"
                style = dict(PATH_STYLE.get(path, {}))
                style["linestyle"] = LABEL_STYLES[li % len(LABEL_STYLES)]
                ax_t.plot(x, [r["time_us"] for r in rows], label=name, markersize=4, **style)
                ax_b.plot(x, [r["busbw_gbs"] for r in rows], label=name, markersize=4, **style)
                bad = [r for r in rows if not r["ok"]]
                if bad:
                    ax_t.plot([r["bytes"] for r in bad], [r["time_us"] for r in bad], "rx",
                              markersize=10)
        for ax in (ax_t, ax_b):
            ax.set_xscale("log", base=2)
            ax.set_xlabel("size (bytes, nccl-tests convention)")
            ax.grid(True, which="both", alpha=0.3)
            ticks = sorted({r["bytes"] for _, d in members for r in d["results"] if r["op"] == op})
            ticks = ticks[:: max(1, len(ticks) // 8)]
            ax.set_xticks(ticks)
            ax.set_xticklabels([human_bytes(t) for t in ticks])
        ax_t.set_yscale("log")
        ax_t.set_ylabel("time per call (µs, median of rounds)")
        ax_t.set_title("latency")
        ax_b.set_yscale("log")
        ax_b.set_ylabel("busbw (GB/s)")
        ax_b.set_title("bus bandwidth")
        ax_b.legend(fontsize=8, loc="best")
        cores = members[0][1].get("cores", "?")
        title = f"{OP_TITLES.get(op, op)}, float32, {n} ranks on {cores} cores"
        if labels:
            title += " — " + " vs ".join(labels)
        fig.suptitle(title)
        fig.tight_layout()
        out = os.path.join(args.out, f"{args.prefix}_{op}_np{n}.png")
        fig.savefig(out, dpi=80)
        plt.close(fig)
        written.append(out)
    for w in written:
        print(w)
    return 0


if __name__ == "__main__":
    sys.exit(main())
