-- fashion_mnist.lua - trains an MLP (784-256-256-10, ReLU) on Fashion-MNIST
-- with cross-entropy and Adam, then reports test accuracy, speed and what
-- the compiler did, and writes a checkpoint and a loss curve.
--
--   lazylua scripts/fashion_mnist.lua [DATA_DIR] [--epochs N] [--batch N]
--           [--lr X] [--optimizer adam|sgd] [--out DIR] [--seed N] [--limit N]
--           [--steps N] [--save-state FILE] [--resume FILE] [--export FILE.onnx]
--
-- DATA_DIR holds the four IDX files (gzip or not); the default is where
-- Debian's dataset-fashion-mnist package puts them. --limit N trains on the
-- first N training images only (0, the default: all of them). --steps N
-- stops after N training steps, --save-state FILE writes the training state
-- after each epoch and at such a stop, and --resume FILE continues that run
-- bit for bit (docs/training.md, "Resuming a run").
-- --export FILE.onnx writes the trained model as ONNX (docs/onnx.md, "Export").
-- The options, the data and the training loop are in fashion_common.lua.
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/fashion_common.lua").run{
  name = "fashion_mnist",
  title = "Fashion-MNIST MLP",
  epochs = 8,
  batch = 128,
  optimizers = {"adam", "sgd"},
  image_shape = {28 * 28},
  eval_batch = 1000,
  model = function(nn)
    return nn.Sequential(
      nn.Linear(784, 256), nn.ReLU(),
      nn.Linear(256, 256), nn.ReLU(),
      nn.Linear(256, 10))
  end,
}
