"""report.py RESULTS.jsonl... - run.sh's table, from its raw results (several files: the
runs of several run.sh, in one table).

Each line of RESULTS is "RUNNER<TAB>{json}" (RUNNER: lazylua, torch or ort), a RESULT of
run_lazylua.lua, run_torch.py or run_ort.js. Prints one Markdown table, a row per model
and opset: lazylua's and ONNX Runtime's match against PyTorch (max |diff| / max |output|:
ORT's shows how far f32 rounding alone takes a model from PyTorch's), the steady time
per call of the three and the ratios lazylua/PyTorch and lazylua/ORT (below 1: lazylua is
faster), each one's peak RSS (the larger of the two batches), the call from which lazylua
ran native code only and the seconds from onnx.load to the end of that call (empty
cache), and the errors. Then the geometric means of the ratios, each runner's match
against PyTorch's float64 run of the model (when export.py wrote one) and the training
step.
"""
import json
import math
import sys


def load(path):
    results = []
    with open(path) as f:
        for line in f:
            runner, _, text = line.rstrip("\n").partition("\t")
            record = json.loads(text)
            record["runner"] = runner
            results.append(record)
    return results


def ms(seconds):
    if seconds is None:
        return "—"
    value = seconds * 1000
    return f"{value:.3g}" if value < 1000 else f"{value:.0f}"


def ratio(a, b):
    return a / b if a and b else None


def pair(values, form):
    return " / ".join(form(v) if v is not None else "—" for v in values)


def main():
    results = [record for path in sys.argv[1:] for record in load(path)]
    inference = [r for r in results if r.get("mode", "infer") == "infer"]
    models, opsets, batches = [], [], []
    for r in results:
        if "model" in r and r["model"] not in models and r.get("mode", "infer") == "infer":
            models.append(r["model"])
        if r["runner"] != "torch" and "opset" in r and r["opset"] not in opsets:
            opsets.append(r["opset"])
        if "batch" in r and r["batch"] not in batches and r.get("mode", "infer") == "infer":
            batches.append(r["batch"])

    batches = batches or [1, 8]  # only failed exports: the rows still show the columns

    def find(runner, model, batch, opset=None):
        for r in inference:
            if (r["runner"] == runner and r.get("model") == model and r.get("batch") == batch
                    and (runner == "torch" or r.get("opset") == opset)):
                return r
        return {}

    per_batch = "b" + "/b".join(map(str, batches))
    header = ["model", "opset", "match " + per_batch, "ORT match " + per_batch]
    for who in ("lazylua", "PyTorch", "ORT"):
        header.append(f"{who} ms {per_batch}")
    header += [f"lazylua/PyTorch {per_batch}", f"lazylua/ORT {per_batch}",
               "peak RSS MB lazylua/PyTorch/ORT", f"native by call {per_batch}",
               f"s to native {per_batch}", "errors"]
    print("| " + " | ".join(header) + " |")
    print("|" + "---|" * len(header))
    ratios = {(kind, b): [] for kind in ("torch", "ort") for b in batches}
    for model in models:
        for opset in opsets:
            runs = {b: {who: find(who, model, b, opset) for who in ("lazylua", "torch", "ort")}
                    for b in batches}
            steady = {b: {who: runs[b][who].get("steady_seconds") if "error" not in runs[b][who]
                          else None for who in runs[b]} for b in batches}
            to_torch = [ratio(steady[b]["lazylua"], steady[b]["torch"]) for b in batches]
            to_ort = [ratio(steady[b]["lazylua"], steady[b]["ort"]) for b in batches]
            for b, value in zip(batches, to_torch):
                if value:
                    ratios[("torch", b)].append(value)
            for b, value in zip(batches, to_ort):
                if value:
                    ratios[("ort", b)].append(value)
            rss = []
            for who in ("lazylua", "torch", "ort"):
                peaks = [runs[b][who].get("peak_rss_mb") for b in batches]
                peaks = [p for p in peaks if p is not None]
                rss.append(f"{max(peaks):.0f}" if peaks else "—")
            errors = [r["error"] for r in results if r["runner"] == "export" and r["model"] == model]
            for b in batches:
                for who in ("lazylua", "torch", "ort"):
                    if "error" in runs[b][who]:
                        errors.append(f"{who} b{b}: " + runs[b][who]["error"][:160])
            lazylua = [runs[b]["lazylua"] for b in batches]
            row = [
                model, str(opset),
                pair([r.get("match") if "error" not in r else None for r in lazylua],
                     lambda v: f"{v:.1e}"),
                pair([runs[b]["ort"].get("match") if "error" not in runs[b]["ort"] else None
                      for b in batches], lambda v: f"{v:.1e}"),
                pair([steady[b]["lazylua"] for b in batches], ms),
                pair([steady[b]["torch"] for b in batches], ms),
                pair([steady[b]["ort"] for b in batches], ms),
                pair(to_torch, lambda v: f"{v:.2f}"),
                pair(to_ort, lambda v: f"{v:.2f}"),
                " / ".join(rss),
                pair([r.get("native_call") for r in lazylua], str),
                pair([r.get("native_seconds") for r in lazylua], lambda v: f"{v:.1f}"),
                "; ".join(errors).replace("|", "\\|").replace("\n", " "),
            ]
            print("| " + " | ".join(row) + " |")
    print()
    for kind, name in (("torch", "PyTorch"), ("ort", "ORT")):
        parts = []
        for b in batches:
            values = ratios[(kind, b)]
            if values:
                mean = math.exp(sum(math.log(v) for v in values) / len(values))
                parts.append(f"b{b} {mean:.2f} ({len(values)} rows)")
            else:
                parts.append(f"b{b} —")
        print(f"geometric mean of lazylua/{name} steady time: " + ", ".join(parts))

    # Each runner against PyTorch's float64 run of the same model (export.py --f64): a
    # model whose PyTorch f32 output is itself far from it is one where f32 rounding
    # alone decides the match above.
    exact_rows = []
    for model in models:
        for opset in opsets:
            cells = []
            for who in ("lazylua", "torch", "ort"):
                values = []
                for b in batches:
                    r = find(who, model, b, None if who == "torch" else opset)
                    values.append(r.get("match_f64") if "error" not in r else None)
                cells.append(pair(values, lambda v: f"{v:.1e}"))
            if any(cell.replace("—", "").replace("/", "").strip() for cell in cells):
                exact_rows.append([model, str(opset)] + cells)
    if exact_rows:
        print()
        print(f"| model | opset | lazylua vs f64 {per_batch} | PyTorch f32 vs f64 {per_batch} "
              f"| ORT vs f64 {per_batch} |")
        print("|---|---|---|---|---|")
        for row in exact_rows:
            print("| " + " | ".join(row) + " |")
        print()

    training = {r["runner"]: r for r in results if r.get("mode") == "train"}
    if training:
        lazylua, torch = training.get("lazylua", {}), training.get("torch", {})
        line = "training step, resnet18 batch 8 (SGD, cross-entropy)"
        if "opset" in lazylua:
            line += f", opset {lazylua['opset']}"
        line += ": "
        if "error" in lazylua:
            line += "lazylua error: " + lazylua["error"]
        else:
            line += f"lazylua {ms(lazylua.get('steady_seconds'))} ms"
            line += f" (peak RSS {lazylua.get('peak_rss_mb', 0):.0f} MB)"
        if "error" in torch:
            line += "; PyTorch error: " + torch["error"]
        else:
            line += f", PyTorch {ms(torch.get('steady_seconds'))} ms"
            line += f" (peak RSS {torch.get('peak_rss_mb', 0):.0f} MB)"
        steps = ratio(lazylua.get("steady_seconds"), torch.get("steady_seconds"))
        if steps and "error" not in lazylua and "error" not in torch:
            line += f", lazylua/PyTorch {steps:.2f}"
        if "first_loss" in lazylua and "first_loss" in torch:
            line += (f"; first loss {lazylua['first_loss']:.6g} vs PyTorch's "
                     f"{torch['first_loss']:.6g}")
        print(line)


if __name__ == "__main__":
    main()
