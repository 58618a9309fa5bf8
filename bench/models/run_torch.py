"""run_torch.py - one model of the suite through PyTorch eager, in a process of its own.

    /usr/bin/python3 run_torch.py infer WORK NAME BATCH [BUDGET_SECONDS]
    /usr/bin/python3 run_torch.py train WORK resnet18 8 [BUDGET_SECONDS]

The same measurements as run_lazylua.lua, on the model export.py built, with the state
dict it saved (NAME.pt): 2 threads, OMP_WAIT_POLICY=passive (set before torch is
imported: OpenMP reads it once), eval mode, torch.no_grad() for inference. train: the
same SGD step on the same cross-entropy loss, the model in eval mode (BatchNorm uses its
running statistics, as the exported graph, which folds it into the convolutions, does).
Prints one line "RESULT {json}".
"""
import os

os.environ["OMP_WAIT_POLICY"] = "passive"

import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

MAX_CALLS, MIN_CALLS, STEADY_CALLS = 200, 3, 5


def peak_rss_mb():
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return None


def timed_calls(step, started, budget, result):
    """The first call, then more within the budget (at least MIN_CALLS in all); steady:
    the median of the last STEADY_CALLS, never the first."""
    times = []
    budget_start = None
    while len(times) < MAX_CALLS and (len(times) < MIN_CALLS or time.perf_counter() - budget_start < budget):
        t0 = time.perf_counter()
        step(len(times) + 1)
        times.append(time.perf_counter() - t0)
        budget_start = budget_start or time.perf_counter()
    result["calls"] = len(times)
    result["first_seconds"] = times[0]
    result["steady_seconds"] = statistics.median(times[max(min(1, len(times) - 1), len(times) - STEADY_CALLS):])


def main():
    mode, work, name, batch = sys.argv[1:5]
    budget = float(sys.argv[5]) if len(sys.argv) > 5 else 15.0
    result = {"mode": mode, "model": name, "batch": int(batch)}
    try:
        import numpy as np
        import torch
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import export

        torch.set_num_threads(2)
        path = lambda suffix: os.path.join(work, name + suffix)
        started = time.perf_counter()
        model = export.build(name)
        model.load_state_dict(torch.load(path(".pt")))
        model.eval()
        result["load_seconds"] = time.perf_counter() - started
        x = torch.from_numpy(np.load(path(f"_x{batch}.npy")))
        if mode == "infer":
            expected = torch.from_numpy(np.load(path(f"_y{batch}.npy")))
            outputs = []

            def call(number):
                with torch.no_grad():
                    y = model(x)
                if number == 1:
                    outputs.append(y)

            timed_calls(call, started, budget, result)
            result["max_abs_diff"] = (outputs[0] - expected).abs().max().item()
            result["output_scale"] = expected.abs().max().item()
            result["match"] = result["max_abs_diff"] / result["output_scale"]
            # Against its own float64 run (export.py --f64), when there is one.
            if os.path.exists(path(f"_f64_y{batch}.npy")):
                exact = torch.from_numpy(np.load(path(f"_f64_y{batch}.npy")))
                result["match_f64"] = ((outputs[0].double() - exact).abs().max().item()
                                       / exact.abs().max().item())
        else:
            targets = torch.from_numpy(np.load(path(f"_t{batch}.npy")))
            criterion = torch.nn.CrossEntropyLoss()
            opt = torch.optim.SGD(model.parameters(), lr=0.01)
            losses = []

            def step(number):
                opt.zero_grad()
                loss = criterion(model(x), targets)
                loss.backward()
                opt.step()
                if number == 1:
                    losses.append(loss.item())

            timed_calls(step, started, budget, result)
            result["first_loss"] = losses[0]
    except Exception as error:  # the row shows it; the suite goes on
        result["error"] = f"{type(error).__name__}: {error}"
    result["peak_rss_mb"] = peak_rss_mb()
    print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
