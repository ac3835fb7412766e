#!/usr/bin/python3
"""Draws `opreg bench`'s CSV (Liger-Kernel's benchmark schema with opreg's extra columns): one PNG
per op and mode, GB/s against the hidden size, a line per device, provider and dtype, each
device's bandwidth ceiling dashed, emulated estimates dotted.

  plot_bench.py --csv DIR/all_benchmark_data.csv --out DIR [--compare DIR/compare_data.csv]
                [--title MACHINE]

The title names the op, the mode, MACHINE and the build in the CSV's liger_version column
(opreg's version and commit).

--compare overlays another CSV of the same columns (what `opreg bench --compare` converts).
Exit status: 0 drawn, 2 bad arguments or data, 4 matplotlib is not installed."""
import argparse
import csv
import json
import math
import os
import sys


def load(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def text(s):
    """A name as plain text: matplotlib reads a label with two unescaped '$' as mathtext (a compared
    provider '$\\frac{1}{$' would be a parse error and no PNG). Escaping every '$' keeps the text
    as given (matplotlib drops the backslash of '\\$' in plain text)."""
    return str(s).replace("$", r"\$")


def number(text):
    try:
        v = float(text)
    except (TypeError, ValueError):
        return math.nan
    return v


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--csv", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--compare")
    ap.add_argument("--title", default="", help="the machine, for the titles")
    a = ap.parse_args()
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        print(f"plot_bench.py: matplotlib is not installed ({e}); Debian: apt-get install python3-matplotlib "
              "(scripts/install-deps.sh installs it)", file=sys.stderr)
        return 4
    rows = load(a.csv)
    peers = load(a.compare) if a.compare else []
    for r in rows:
        r["_peer"] = False
    for r in peers:
        r["_peer"] = True
    figures = {}
    for r in rows + peers:
        figures.setdefault((r["kernel_name"], r["kernel_operation_mode"]), []).append(r)
    written = []
    for (op, mode), frs in sorted(figures.items()):
        if not any(not r["_peer"] for r in frs):
            continue  # the compare file's ops that this run did not measure
        lines = {}
        ceilings = {}
        for r in frs:
            g = number(r.get("gbps_50"))
            if not r["_peer"] and r.get("status") != "ok":
                continue
            if not math.isfinite(g):
                continue
            dtype = ""
            if "bfloat16" in r["extra_benchmark_config_str"]:
                dtype = "bf16"
            elif "float16" in r["extra_benchmark_config_str"]:
                dtype = "f16"
            elif "float32" in r["extra_benchmark_config_str"]:
                dtype = "f32"
            who = r["gpu_name"] if r["_peer"] else r["device"]
            # A compared row's shape is its own (another M is another line).
            rows_m = ""
            if r["_peer"]:
                try:
                    rows_m = str(json.loads(r["extra_benchmark_config_str"]).get("M", ""))
                except ValueError:
                    pass
            key = (r["_peer"], who, r["kernel_provider"], dtype, r.get("estimate") == "1", rows_m)
            lines.setdefault(key, []).append((int(r["x_value"]), g, number(r.get("gbps_20")), number(r.get("gbps_80"))))
            c = number(r.get("ceiling_gbps"))
            if not r["_peer"] and math.isfinite(c):
                ceilings[(r["device"], r["gpu_name"], r.get("estimate") == "1")] = c
        if not lines:
            continue
        fig, ax = plt.subplots(figsize=(9, 5.5), dpi=90)
        colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
        markers = "o^vDPX*"
        # One colour per device (and compared GPU), shared by its ceiling; one marker per provider.
        device_color = {}
        provider_marker = {}
        for peer, who, provider, dtype, est, rows_m in sorted(lines):
            pts = sorted(lines[(peer, who, provider, dtype, est, rows_m)])
            xs = [p[0] for p in pts]
            ys = [p[1] for p in pts]
            color = device_color.setdefault((peer, who), colors[len(device_color) % len(colors)])
            marker = provider_marker.setdefault(provider, markers[len(provider_marker) % len(markers)])
            if peer:
                style = "-."
                label = f"{provider} on {who} ({dtype}, M={rows_m}, compared)"
            elif est:
                style = ":"
                label = f"{who} {provider} ({dtype}, emulated est.)"
            else:
                style = "-"
                label = f"{who} {provider} ({dtype})"
            ax.plot(xs, ys, linestyle=style, marker=marker, color=color, label=text(label), linewidth=1.8)
            lo = [p[3] for p in pts]  # 80th percentile of time: the lower GB/s
            hi = [p[2] for p in pts]
            if all(math.isfinite(v) for v in lo + hi):
                ax.fill_between(xs, lo, hi, color=color, alpha=0.15, linewidth=0)
        for (device, name, est), c in sorted(ceilings.items()):
            ax.axhline(c, linestyle="--", color=device_color.get((False, device), "0.4"), linewidth=1.2,
                       label=text(f"{device} ceiling {c:.3g} GB/s" + (" (profile, emulated est.)" if est else " (measured copy)")))
        ax.set_xscale("log", base=2)
        # Devices orders of magnitude apart (a cpu beside a GPU or the npu model) share a log axis.
        ys_all = [p[1] for pts in lines.values() for p in pts] + list(ceilings.values())
        log_y = min(ys_all) > 0 and max(ys_all) / min(ys_all) > 30
        xs_all = sorted({p[0] for pts in lines.values() for p in pts})
        ax.set_xticks(xs_all)
        ax.set_xticklabels([str(x) for x in xs_all])
        ax.set_xlabel("hidden size (elements per row)")
        ax.set_ylabel("GB/s (opreg byte model / median time)" + (", log scale" if log_y else ""))
        if log_y:
            ax.set_yscale("log")
        else:
            ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
        # The build that measured the data: its liger_version column (opreg's version and commit).
        builds = sorted({r["liger_version"] for r in frs if not r["_peer"]})
        title = f"{op} {mode}: GB/s vs hidden size\n" + ", ".join(filter(None, [a.title] + builds))
        ax.set_title(text(title), fontsize=10)
        ax.legend(fontsize=7, loc="best")
        fig.tight_layout()
        path = os.path.join(a.out, f"{op}_{mode}.png")
        fig.savefig(path)
        plt.close(fig)
        written.append(path)
    for p in written:
        print(f"plot_bench.py: wrote {p}")
    if not written:
        print("plot_bench.py: nothing was timed, so nothing was drawn", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
