-- fashion_cnn.lua - trains a small convolutional network on Fashion-MNIST
-- with cross-entropy and Adam, then reports test accuracy, speed and what
-- the compiler did, and writes a checkpoint and a loss curve. It is the
-- convolutional sibling of fashion_mnist.lua (same options and output).
--
--   lazylua scripts/fashion_cnn.lua [DATA_DIR] [--epochs N] [--batch N]
--           [--lr X] [--out DIR] [--seed N] [--limit N]
--           [--steps N] [--save-state FILE] [--resume FILE] [--export FILE.onnx]
--
-- DATA_DIR holds the four IDX files (gzip or not); the default is where
-- Debian's dataset-fashion-mnist package puts them. --limit N trains on the
-- first N training images only (0, the default: all of them). --steps N
-- stops after N training steps, --save-state FILE writes the training state
-- after each epoch and at such a stop, and --resume FILE continues that run
-- bit for bit (docs/training.md, "Resuming a run").
-- --export FILE.onnx writes the trained model as ONNX (docs/onnx.md, "Export").
local here = arg[0]:match("^(.*)/") or "."
dofile(here .. "/fashion_common.lua").run{
  name = "fashion_cnn",
  title = "Fashion-MNIST CNN",
  epochs = 4,
  batch = 64,
  optimizers = {"adam"},
  image_shape = {1, 28, 28},
  eval_batch = 500,
  -- two 3x3 convolutions, each halving the image with a 2x2 max-pool
  -- (28 -> 14 -> 7), then a two-layer classifier
  model = function(nn)
    return nn.Sequential(
      nn.Conv2d(1, 16, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Conv2d(16, 32, 3, {padding = 1}), nn.ReLU(), nn.MaxPool2d(2),
      nn.Flatten(),
      nn.Linear(32 * 7 * 7, 128), nn.ReLU(),
      nn.Linear(128, 10))
  end,
}
