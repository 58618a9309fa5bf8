"""export.py - the model suite's files, written by PyTorch (nothing downloaded).

    /usr/bin/python3 export.py OUT_DIR [--models a,b] [--size PIXELS] [--batches 1,8]
                                       [--opsets 13,17] [--f64]

For each model: NAME_opOPSET.onnx (torch.onnx.export with do_constant_folding and a
dynamic batch), NAME.pt (the state dict run_torch.py loads), NAME_xB.npy (a random input
at batch B) and NAME_yB.npy (PyTorch's output for it, in eval mode). resnet18 also gets
resnet18_t8.npy, the class targets of the training step. With --f64, NAME_f64_yB.npy too:
the output of the same model and input in float64, the reference that tells how far f32
rounding alone takes each runner (PyTorch's f32 run included). A file already in OUT_DIR is
kept (each is written under a temporary name, then renamed, so an interrupted export
leaves no partial file behind).

The weights are random (torch.manual_seed per model). BatchNorm running statistics are
calibrated on 4 random batches in train mode (momentum None: a plain average), so that
outputs are O(1): with the default statistics MobileNet's and EfficientNet's outputs are
about 1e-9 and 1e-14. torchvision zero-initializes ViT's head (every output would be 0):
it gets normal(0, 0.02) weights.
"""
import argparse
import copy
import os
import sys

import numpy as np
import torch
import torchvision


class TransformerEncoder(torch.nn.Module):
    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(128, 4, 512, 0.1, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, 4, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class RecurrentNet(torch.nn.Module):
    """A GRU or LSTM (input 32, hidden 64) and a Linear(64, 10) on the last step."""

    def __init__(self, cell, num_layers):
        super().__init__()
        self.rnn = cell(32, 64, num_layers=num_layers, batch_first=True)
        self.head = torch.nn.Linear(64, 10)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


class DeepLabOut(torch.nn.Module):
    """DeepLabV3 returns a dict; the suite compares its "out"."""

    def __init__(self):
        super().__init__()
        self.net = torchvision.models.segmentation.deeplabv3_resnet50(
            weights=None, weights_backbone=None, aux_loss=False)

    def forward(self, x):
        return self.net(x)["out"]


def vit_b_16():
    model = torchvision.models.vit_b_16(weights=None)
    torch.nn.init.normal_(model.heads.head.weight, 0.0, 0.02)
    return model


def torchvision_model(name):
    return lambda: getattr(torchvision.models, name)(weights=None)


def image(size):
    return lambda pixels: (3, pixels or size, pixels or size)


# name -> (constructor, input shape without the batch given --size or None)
MODELS = {
    "resnet18": (torchvision_model("resnet18"), image(224)),
    "mobilenet_v2": (torchvision_model("mobilenet_v2"), image(224)),
    "squeezenet1_1": (torchvision_model("squeezenet1_1"), image(224)),
    "efficientnet_b0": (torchvision_model("efficientnet_b0"), image(224)),
    "shufflenet_v2_x1_0": (torchvision_model("shufflenet_v2_x1_0"), image(224)),
    "vit_b_16": (vit_b_16, lambda pixels: (3, 224, 224)),  # its patch grid is fixed
    "deeplabv3_resnet50": (DeepLabOut, image(256)),
    "transformer_encoder": (TransformerEncoder, lambda pixels: (32, 128)),
    "gru": (lambda: RecurrentNet(torch.nn.GRU, 2), lambda pixels: (20, 32)),
    "lstm": (lambda: RecurrentNet(torch.nn.LSTM, 1), lambda pixels: (20, 32)),
}


def build(name):
    """The model in eval mode, its weights fixed by the seed, BatchNorm calibrated."""
    make, _ = MODELS[name]
    torch.manual_seed(0)
    model = make()
    return model


def calibrate(model, shape):
    norms = [m for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)]
    if norms:
        for norm in norms:
            norm.momentum = None
        model.train()
        generator = torch.Generator().manual_seed(7)
        with torch.no_grad():
            for _ in range(4):
                model(torch.randn((8,) + shape, generator=generator))
    model.eval()


def input_shape(name, pixels):
    return MODELS[name][1](pixels)


def sample_input(shape, batch):
    return torch.randn((batch,) + shape, generator=torch.Generator().manual_seed(100 + batch))


def training_targets(batch, classes=1000):
    generator = torch.Generator().manual_seed(200 + batch)
    return torch.randint(0, classes, (batch,), generator=generator)


def write_atomically(path, write):
    temporary = path + ".partial"
    write(temporary)
    os.replace(temporary, path)


def save_npy(path, array):
    def write(temporary):
        with open(temporary, "wb") as f:
            np.save(f, array)
    write_atomically(path, write)


def export(name, out_dir, pixels, batches, opsets, f64):
    shape = input_shape(name, pixels)
    path = lambda suffix: os.path.join(out_dir, name + suffix)
    wanted = [path(".pt")] + [path(f"_op{o}.onnx") for o in opsets]
    wanted += [path(f"_x{b}.npy") for b in batches] + [path(f"_y{b}.npy") for b in batches]
    if f64:
        wanted += [path(f"_f64_y{b}.npy") for b in batches]
    if name == "resnet18":
        wanted.append(path("_t8.npy"))
    if all(os.path.exists(p) for p in wanted):
        return
    model = build(name)
    if os.path.exists(path(".pt")):  # the weights the other files were made with
        model.load_state_dict(torch.load(path(".pt")))
        model.eval()
    else:
        calibrate(model, shape)
        write_atomically(path(".pt"), lambda p: torch.save(model.state_dict(), p))
    for batch in batches:
        x = sample_input(shape, batch)
        if not os.path.exists(path(f"_x{batch}.npy")):
            save_npy(path(f"_x{batch}.npy"), x.numpy())
        if not os.path.exists(path(f"_y{batch}.npy")):
            with torch.no_grad():
                save_npy(path(f"_y{batch}.npy"), model(x).numpy())
    if f64 and not all(os.path.exists(path(f"_f64_y{b}.npy")) for b in batches):
        model64 = copy.deepcopy(model).double()
        for batch in batches:
            x = sample_input(shape, batch)
            if not os.path.exists(path(f"_f64_y{batch}.npy")):
                with torch.no_grad():
                    save_npy(path(f"_f64_y{batch}.npy"), model64(x.double()).numpy())
    if name == "resnet18" and not os.path.exists(path("_t8.npy")):
        save_npy(path("_t8.npy"), training_targets(8).numpy())
    for opset in opsets:
        if os.path.exists(path(f"_op{opset}.onnx")):
            continue
        example = sample_input(shape, 1)
        write_atomically(path(f"_op{opset}.onnx"), lambda p: torch.onnx.export(
            model, example, p, opset_version=opset, do_constant_folding=True,
            input_names=["input"], output_names=["output"],
            dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}}))
    print(f"export: {name} written", file=sys.stderr)


def integer_list(text):
    return [int(v) for v in text.split(",")]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("out_dir")
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--size", type=int, default=None,
                        help="image side for the CNNs (default: 224, DeepLabV3 256)")
    parser.add_argument("--batches", type=integer_list, default=[1, 8])
    parser.add_argument("--opsets", type=integer_list, default=[13, 17])
    parser.add_argument("--f64", action="store_true",
                        help="also write each output computed in float64 (NAME_f64_yB.npy)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    torch.set_num_threads(2)
    for name in args.models.split(","):
        if name not in MODELS:
            sys.exit(f"export: unknown model '{name}' (known: {', '.join(MODELS)})")
        export(name, args.out_dir, args.size, args.batches, args.opsets, args.f64)


if __name__ == "__main__":
    main()
