"""Every convolution layer of torchvision's resnet18 and mobilenet_v2 (the
models of bench/models/), one line per layer, as the bench reads them:

    model index C H W O kh kw stride pad dilation groups

H and W are the layer's input at batch 1 (224x224 images), found by running
the model once with forward hooks. Identical layers are kept (one line each),
so the per-model totals are the models' real totals.

    /usr/bin/python3 list_layers.py > layers.txt
"""
import torch
import torchvision


def layers_of(name, model):
    rows = []

    def hook(module, inputs, _output):
        x = inputs[0]
        rows.append((name, len(rows), x.shape[1], x.shape[2], x.shape[3],
                     module.out_channels, module.kernel_size[0], module.kernel_size[1],
                     module.stride[0], module.padding[0], module.dilation[0], module.groups))

    for module in model.modules():
        if isinstance(module, torch.nn.Conv2d):
            assert module.stride[0] == module.stride[1]
            assert module.padding[0] == module.padding[1]
            assert module.dilation[0] == module.dilation[1]
            module.register_forward_hook(hook)
    with torch.no_grad():
        model.eval()(torch.zeros(1, 3, 224, 224))
    return rows


def main():
    print("# model index C H W O kh kw stride pad dilation groups"
          " (from list_layers.py, torchvision %s)" % torchvision.__version__)
    for name in ("resnet18", "mobilenet_v2"):
        model = getattr(torchvision.models, name)(weights=None)
        for row in layers_of(name, model):
            print(" ".join(str(v) for v in row))


main()
