"""Joins the TSV rows of lazylua_layers.lua and conv_bench (one file per
candidate and batch) into the tables of run.sh's report (Markdown).

    python3 report.py LAYERS RESULTS_DIR BATCH...

RESULTS_DIR holds lazylua_bB.tsv, onednn_bB.tsv and xnnpack_bB.tsv.
"""
import math
import os
import sys


def read_tsv(path):
    with open(path) as f:
        lines = [line.rstrip("\n").split("\t") for line in f if line.strip()]
    header, rows = lines[0], lines[1:]
    return {(r[0], r[1]): dict(zip(header, r)) for r in rows}


def read_layers(path):
    layers = []
    with open(path) as f:
        for line in f:
            if line.startswith("#") or not line.strip():
                continue
            model, index, c, h, w, o, kh, kw, stride, pad, dilation, groups = line.split()
            layers.append(dict(model=model, index=index, c=int(c), h=int(h), w=int(w), o=int(o),
                               kh=int(kh), kw=int(kw), stride=int(stride), pad=int(pad),
                               dilation=int(dilation), groups=int(groups)))
    return layers


def describe(layer):
    kind = "%dx%d" % (layer["kh"], layer["kw"])
    if layer["groups"] > 1:
        kind = "dw" + kind if layer["groups"] == layer["c"] else "%s g%d" % (kind, layer["groups"])
    stride = " s%d" % layer["stride"] if layer["stride"] > 1 else ""
    return "%s%s %d->%d @%d" % (kind, stride, layer["c"], layer["o"], layer["h"])


def number(row, key):
    value = float(row[key])
    return None if math.isnan(value) else value


# The candidates of the main table: (title, function of the joined row giving
# ms, or None where it cannot run).
def reordered(conv, into, out):
    def total(row):
        parts = [number(row, k) for k in (conv, into, out)]
        return None if None in parts else sum(parts)
    return total


CANDIDATES = [
    ("lazylua NCHW", lambda r: number(r, "lazylua")),
    ("oneDNN NCHW", lambda r: number(r, "nchw")),
    ("oneDNN NHWC*", lambda r: number(r, "any")),
    ("oneDNN NHWC* +reorders", reordered("any", "any_in", "any_out")),
    ("oneDNN nChw16c", lambda r: number(r, "b16c")),
    ("oneDNN nChw16c +reorders", reordered("b16c", "b16c_in", "b16c_out")),
    ("XNNPACK NHWC", lambda r: number(r, "xnn")),
    ("XNNPACK NHWC +reorders", reordered("xnn", "nhwc_in", "nhwc_out")),
]

EPILOGUES = [
    ("oneDNN NCHW conv+bias", "nchw"),
    ("+relu", "nchw_relu"),
    ("+sum(residual)+relu", "nchw_sum_relu"),
    ("+bn(binary mul,add)+sum+relu", "nchw_bn_sum_relu"),
    ("oneDNN NHWC* conv+bias", "any"),
    ("+relu", "any_relu"),
    ("+sum+relu", "any_sum_relu"),
    ("+bn+sum+relu", "any_bn_sum_relu"),
    ("oneDNN nChw16c conv+bias", "b16c"),
    ("+relu", "b16c_relu"),
    ("+sum+relu", "b16c_sum_relu"),
    ("+bn+sum+relu", "b16c_bn_sum_relu"),
    ("XNNPACK conv+bias", "xnn"),
    ("+relu (clamp)", "xnn_relu"),
]


def cell(ms, flops):
    if ms is None:
        return "ref (not timed)"
    return "%.3f (%.0f)" % (ms, flops / ms / 1e6)


def main():
    layers_path, results, batches = sys.argv[1], sys.argv[2], sys.argv[3:]
    layers = read_layers(layers_path)
    for batch in batches:
        joined = {}
        for name in ("lazylua", "onednn", "xnnpack"):
            for key, row in read_tsv(os.path.join(results, "%s_b%s.tsv" % (name, batch))).items():
                joined.setdefault(key, {}).update(row)
        for model in sorted({l["model"] for l in layers}, key=lambda m: m != "resnet18"):
            rows = [(l, joined[(l["model"], l["index"])]) for l in layers if l["model"] == model]
            print("\n### %s, batch %s: ms per call (GFLOP/s)\n" % (model, batch))
            titles = [t for t, _ in CANDIDATES]
            print("| # | layer | MFLOP | " + " | ".join(titles) + " | fastest | lazylua / fastest |")
            print("|---" * (len(titles) + 5) + "|")
            totals = [0.0] * len(CANDIDATES)
            missing = [False] * len(CANDIDATES)
            best_total, flops_total = 0.0, 0.0
            for layer, row in rows:
                flops = float(row["flops"])
                flops_total += flops
                times = [f(row) for _, f in CANDIDATES]
                for i, t in enumerate(times):
                    if t is None:
                        missing[i] = True
                    else:
                        totals[i] += t
                # The fastest that keeps lazylua's NCHW in and out.
                usable = [(t, titles[i]) for i, t in enumerate(times)
                          if t is not None and (i < 2 or "reorders" in titles[i])]
                best, best_name = min(usable)
                best_total += best
                print("| %s | %s | %.1f | %s | %s | %.2f |" % (
                    layer["index"], describe(layer), flops / 1e6,
                    " | ".join(cell(t, flops) for t in times), best_name, times[0] / best))
            print("| | **total** | %.0f | %s | %.3f (%.0f) | %.2f |" % (
                flops_total / 1e6,
                " | ".join("n/a (a ref layer)" if missing[i] else "**" + cell(t, flops_total) + "**"
                           for i, t in enumerate(totals)),
                best_total, flops_total / best_total / 1e6, totals[0] / best_total))
            print("\nlazylua's total over each candidate's (above 1: the candidate is faster): " +
                  ", ".join("%s %.2f" % (titles[i], totals[0] / totals[i])
                            for i in range(1, len(titles)) if not missing[i]))
            print("\nEpilogues in the same pass, model total ms (GFLOP/s; ratio to the same "
                  "layout's conv+bias):\n")
            print("| " + " | ".join(t for t, _ in EPILOGUES) + " |")
            print("|---" * len(EPILOGUES) + "|")
            cells = []
            base = None
            for title, key in EPILOGUES:
                values = [number(row, key) for _, row in rows]
                if title.startswith("oneDNN") or title.startswith("XNNPACK conv"):
                    base = None if None in values else sum(values)
                if None in values:
                    cells.append("ref in %d/%d layers" % (values.count(None), len(values)))
                    continue
                total = sum(values)
                ratio = " x%.2f" % (total / base) if base and key not in ("nchw", "any", "b16c", "xnn") else ""
                cells.append("%.2f (%.0f)%s" % (total, flops_total / total / 1e6, ratio))
            print("| " + " | ".join(cells) + " |")
            impls = {}
            for layer, row in rows:
                kind = describe(layer).split(" ")[0]
                impls.setdefault(kind, set()).add(
                    "NCHW %s; NHWC* %s; nChw16c %s; with binary post-ops: NCHW %s, nChw16c %s" % (
                        row["nchw_impl"], row["any_impl"], row["b16c_impl"], row["nchw_bn_impl"],
                        row["b16c_bn_impl"]))
            print("\noneDNN's implementations (impl/src layout): " + "; ".join(
                "**%s**: %s" % (k, " | ".join(sorted(v))) for k, v in impls.items()))
    print("\nNHWC* is the layout oneDNN picks when left free (`format_tag::any`). "
          "'+reorders' adds the NCHW->layout reorder of the input and back of the output "
          "(oneDNN's reorder, same threads), what lazylua, which holds NCHW, would pay per call. "
          "'fastest' is the fastest way from NCHW to NCHW. 'ref (not timed)': oneDNN falls back "
          "to its reference implementation (seconds per call).")


main()
