# test_onnx_rnn.sh - PyTorch's exports of GRU and LSTM models (a 2-layer
# batch_first GRU + Linear, an LSTM + Linear, a bidirectional GRU, a 2-layer
# bidirectional LSTM returning Y, Y_h and Y_c), at opsets 13 and 17 with a
# dynamic batch, imported by onnx.load (stdlib/onnx_ops_rnn.lua) and run at
# batch 1 and 8: every output within 1e-5 of the output's scale of
# PyTorch's, on inputs and outputs saved as .npy by /usr/bin/python3 here.
source "$(dirname "$0")/lib.sh" "$@"

OUT=$WORK/rnn
mkdir -p "$OUT"
cat > "$WORK/export.py" <<'PYTHON'
import sys, os, warnings
import numpy as np
import torch
warnings.filterwarnings("ignore")
torch.manual_seed(0)
out = sys.argv[1]

class GruFc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(16, 32, num_layers=2, batch_first=True)
        self.fc = torch.nn.Linear(32, 5)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y[:, -1])

class LstmFc(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(16, 32)
        self.fc = torch.nn.Linear(32, 5)
    def forward(self, x):
        y, _ = self.rnn(x)
        return self.fc(y)

class BiGru(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.GRU(16, 24, bidirectional=True, batch_first=True)
    def forward(self, x):
        y, h = self.rnn(x)
        return y, h

class BiLstm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = torch.nn.LSTM(16, 24, num_layers=2, bidirectional=True)
    def forward(self, x):
        y, (h, c) = self.rnn(x)
        return y, h, c

# name -> (module, batch_first)
models = {"gru": (GruFc(), True), "lstm": (LstmFc(), False), "bigru": (BiGru(), True), "bilstm": (BiLstm(), False)}
steps = 7
for name, (model, batch_first) in models.items():
    model.eval()
    batch_axis = 0 if batch_first else 1
    for opset in (13, 17):
        example = torch.randn((2, steps, 16) if batch_first else (steps, 2, 16))
        n_out = {"gru": 1, "lstm": 1, "bigru": 2, "bilstm": 3}[name]
        outputs = ["output"] + ["output_%d" % k for k in range(1, n_out)]
        axes = {"input": {batch_axis: "batch"}}
        for o in outputs:
            axes[o] = {}
        torch.onnx.export(model, (example,), os.path.join(out, "%s_%d.onnx" % (name, opset)),
                          opset_version=opset, input_names=["input"], output_names=outputs,
                          dynamic_axes=axes, do_constant_folding=True)
    for batch in (1, 8):
        x = torch.randn((batch, steps, 16) if batch_first else (steps, batch, 16))
        with torch.no_grad():
            ys = model(x)
        if not isinstance(ys, tuple):
            ys = (ys,)
        np.save(os.path.join(out, "%s_x%d.npy" % (name, batch)), x.numpy())
        for k, y in enumerate(ys):
            np.save(os.path.join(out, "%s_y%d_%d.npy" % (name, batch, k + 1)), y.numpy())
print("exported")
PYTHON
cat > "$WORK/check.lua" <<'LUA'
local onnx = require "onnx"
local tensor = require "tensor"
local dir = arg[1]
local counts = {gru = 1, lstm = 1, bigru = 2, bilstm = 3}
local failed = 0
for _, name in ipairs({"gru", "lstm", "bigru", "bilstm"}) do
  for _, opset in ipairs({13, 17}) do
    local model = onnx.load(string.format("%s/%s_%d.onnx", dir, name, opset))
    for _, batch in ipairs({1, 8}) do
      local x = tensor.load_npy(string.format("%s/%s_x%d.npy", dir, name, batch))
      local results = table.pack(model(x))
      for k = 1, counts[name] do
        local want = tensor.load_npy(string.format("%s/%s_y%d_%d.npy", dir, name, batch, k))
        local got = results[k]
        local same_shape = table.concat(got:size(), ",") == table.concat(want:size(), ",")
        local diff = same_shape and (got - want):abs():max():item() or math.huge
        local scale = want:abs():max():item()
        local ok = diff <= 1e-5 * math.max(scale, 1e-30)
        if not ok then failed = failed + 1 end
        print(string.format("%s %s opset %d batch %d output %d: shape [%s] max diff %.3g (scale %.3g)",
          ok and "ok" or "FAIL", name, opset, batch, k, table.concat(got:size(), ", "), diff, scale))
      end
    end
  end
end
if failed > 0 then error(failed .. " outputs differ from PyTorch's") end
print("rnn import ok")
LUA
has_line() { grep -Eq "$1" "$2"; }
env_settings=()

check "PyTorch exports the models" /usr/bin/python3 "$WORK/export.py" "$OUT"
run_program lazylua "$LAZYLUA" "$WORK/check" /dev/null "$WORK/check.lua" "$OUT"
check "lazylua's outputs are PyTorch's" has_line '^rnn import ok$' "$WORK/check.stdout" ||
  sed 's/^/  /' "$WORK/check.stdout" "$WORK/check.stderr"

finish
