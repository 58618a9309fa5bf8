"""bench_memory_torch.py - PyTorch's peak resident memory for the workloads of
bench_memory.lua, measured the same way (VmHWM, reset through
/proc/self/clear_refs between loading and running):
    python3 bench_memory_torch.py export FILE.onnx      # ViT-B/16, weights=None, opset 13
    python3 bench_memory_torch.py vit BATCH CALLS
    python3 bench_memory_torch.py transformer STEPS
"""
import sys

import torch

torch.set_num_threads(2)


def peak_mb():
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def reset_peak():
    with open("/proc/self/clear_refs", "w") as refs:
        refs.write("5")


def vit():
    import torchvision
    torch.manual_seed(0)
    return torchvision.models.vit_b_16(weights=None).eval()


what = sys.argv[1]
if what == "export":
    torch.onnx.export(vit(), torch.randn(1, 3, 224, 224), sys.argv[2], opset_version=13,
                      do_constant_folding=True, input_names=["x"], output_names=["y"],
                      dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
    sys.exit(0)
if what == "vit":
    batch, calls = int(sys.argv[2]), int(sys.argv[3])
    model = vit()
    x = torch.randn(batch, 3, 224, 224)
    print("load_mb %.0f" % peak_mb())
    reset_peak()
    with torch.no_grad():
        for _ in range(calls):
            checksum = model(x).abs().sum().item()
elif what == "transformer":
    steps = int(sys.argv[2])
    torch.manual_seed(0)
    layers = torch.nn.ModuleList(
        torch.nn.TransformerEncoderLayer(256, 8, dim_feedforward=1024, dropout=0.0, batch_first=True)
        for _ in range(4))
    head = torch.nn.Linear(256, 1000)
    opt = torch.optim.Adam(list(layers.parameters()) + list(head.parameters()), lr=1e-4)
    x = torch.randn(16, 128, 256)
    target = torch.randint(0, 1000, (16 * 128,))
    print("load_mb %.0f" % peak_mb())
    reset_peak()
    for _ in range(steps):
        opt.zero_grad()
        h = x
        for layer in layers:
            h = layer(h)
        loss = torch.nn.functional.cross_entropy(head(h).reshape(16 * 128, 1000), target)
        loss.backward()
        opt.step()
        checksum = loss.item()
else:
    sys.exit("bench_memory_torch.py: unknown workload " + what)
print("run_mb %.0f" % peak_mb())
print("checksum %.6g" % checksum)
