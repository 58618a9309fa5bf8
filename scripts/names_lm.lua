-- names_lm.lua - a character-level LSTM language model on the words of
-- Debian's wamerican package, against a bigram baseline computed here.
--
--   lazylua scripts/names_lm.lua [--time SECONDS] [--steps N] [--batch N]
--           [--hidden N] [--lr X] [--seed N] [--samples N] [--words PATH]
--
-- The words made of lowercase a-z only are split (fixed seed) into 80%
-- training, 10% validation and 10% test words. Each word is a sequence of
-- letters followed by an end-of-word token; the model reads a start token
-- and then the letters, and predicts the next letter or the end at every
-- position. Words are padded to the longest word (a fixed length, so the
-- training step is one graph), and the padding is masked out of the loss.
-- The LSTM runs through tensor.scan: the graph and the compiled code hold
-- one time step whatever the length. Training stops after --time seconds
-- (default 50) or --steps steps (default: no limit), whichever comes first.
--
-- Losses are in nats per character, the end-of-word token counting as a
-- character. The baseline is a bigram model (add-one smoothed counts of
-- the training words). At the end the model samples --samples (20) new
-- words: words that are not in the word list.
local nn, optim, data = require "nn", require "optim", require "data"
local now = require("progress").now

local settings = {time = 50, steps = 0, batch = 64, hidden = 128, lr = 0.005, seed = 1, samples = 20,
  words = "/usr/share/dict/words"}

local function usage(message)
  io.stderr:write("names_lm.lua: ", message, "\n", "usage: lazylua scripts/names_lm.lua [--time SECONDS] ",
    "[--steps N] [--batch N] [--hidden N] [--lr X] [--seed N] [--samples N] [--words PATH]\n")
  os.exit(2)
end

do
  local i = 1
  while i <= #arg do
    local key = arg[i]:match("^%-%-(%w+)$")
    if not key or settings[key] == nil then usage("unknown option " .. arg[i]) end
    local value = arg[i + 1] or usage("missing value for " .. arg[i])
    if key ~= "words" then
      value = tonumber(value) or usage("not a number: " .. value)
      if key ~= "lr" and key ~= "time" then value = math.tointeger(value) or usage(arg[i] .. " must be an integer") end
      if value < 0 then usage(arg[i] .. " must be >= 0") end
    end
    settings[key] = value
    i = i + 2
  end
  if settings.batch < 1 or settings.hidden < 1 then usage("--batch and --hidden must be positive") end
end

-- ---------------------------------------------------------------------------
-- The words and their split.

local file = io.open(settings.words) or usage("cannot read " .. settings.words ..
  " (Debian's wamerican package: apt-get install wamerican)")
local words, known = {}, {}
for line in file:lines() do
  if line:match("^[a-z]+$") and not known[line] then
    words[#words + 1] = line
    known[line] = true
  end
end
file:close()
if #words < 100 then usage(settings.words .. " has too few lowercase words (" .. #words .. ")") end

math.randomseed(settings.seed)
tensor.manual_seed(settings.seed)
for i = #words, 2, -1 do  -- Fisher-Yates with the fixed seed
  local j = math.random(i)
  words[i], words[j] = words[j], words[i]
end
local n_valid, n_test = #words // 10, #words // 10
local split = {train = {}, valid = {}, test = {}}
for i, word in ipairs(words) do
  local part = i <= n_test and "test" or (i <= n_test + n_valid and "valid" or "train")
  split[part][#split[part] + 1] = word
end

-- Tokens: a..z are 1..26, the boundary (start of the input, end of the
-- target) is 27. Padded positions read 27 and are masked out.
local BOUNDARY, CLASSES = 27, 27
local length = 0
for _, word in ipairs(words) do length = math.max(length, #word + 1) end

local function code(word, i) return word:byte(i) - 96 end

-- inputs and targets [W, length] i64, mask [W, length] f32.
local function encode(list)
  local inputs, targets, mask = {}, {}, {}
  for w, word in ipairs(list) do
    local x, y, m = {}, {}, {}
    for t = 1, length do
      x[t] = t == 1 and BOUNDARY or (t - 1 <= #word and code(word, t - 1) or BOUNDARY)
      y[t] = t <= #word and code(word, t) or BOUNDARY
      m[t] = t <= #word + 1 and 1.0 or 0.0
    end
    inputs[w], targets[w], mask[w] = x, y, m
  end
  return tensor.new(inputs), tensor.new(targets), tensor.new(mask)
end

local train_set = {encode(split.train)}
local valid_set = {encode(split.valid)}
local test_set = {encode(split.test)}
local characters = 0
for _, word in ipairs(split.test) do characters = characters + #word + 1 end

print(string.format("words: %d lowercase a-z (train %d, validation %d, test %d), padded to %d",
  #words, #split.train, #split.valid, #split.test, length))

-- ---------------------------------------------------------------------------
-- The bigram baseline: P(next | previous) from add-one smoothed counts.

local bigram_loss
do
  local counts = {}
  for prev = 1, CLASSES do
    counts[prev] = {}
    for next = 1, CLASSES do counts[prev][next] = 1 end  -- add one
  end
  local function each_pair(list, f)
    for _, word in ipairs(list) do
      local prev = BOUNDARY
      for i = 1, #word do
        f(prev, code(word, i))
        prev = code(word, i)
      end
      f(prev, BOUNDARY)
    end
  end
  each_pair(split.train, function(a, b) counts[a][b] = counts[a][b] + 1 end)
  local totals = {}
  for prev = 1, CLASSES do
    local sum = 0
    for next = 1, CLASSES do sum = sum + counts[prev][next] end
    totals[prev] = sum
  end
  local total, n = 0, 0
  each_pair(split.test, function(a, b)
    total = total - math.log(counts[a][b] / totals[a])
    n = n + 1
  end)
  assert(n == characters)
  bigram_loss = total / n
end

-- ---------------------------------------------------------------------------
-- The LSTM model: embedding, LSTM, linear to the 27 classes.

local LanguageModel = nn.class("LanguageModel")
function LanguageModel:init(hidden)
  self:add_module("embedding", nn.Embedding(CLASSES, 32))
  self:add_module("lstm", nn.LSTM(32, hidden))
  self:add_module("head", nn.Linear(hidden, CLASSES))
end
-- tokens [T, N] -> logits [T, N, 27], and the final state.
function LanguageModel:forward(tokens, h0, c0)
  local out, h_n, c_n = self.lstm(self.embedding(tokens), h0, c0)
  return self.head(out), h_n, c_n
end

local model = LanguageModel(settings.hidden)

-- The summed loss in nats of a batch [N, length] and its number of characters.
local function batch_loss(inputs, targets, mask)
  local logits = model(inputs:t())                     -- [T, N, 27]
  local logp = logits:reshape(-1, CLASSES):log_softmax(2)
  local picked = logp:gather(2, targets:t():reshape(-1, 1)):reshape(-1)
  return -(picked * mask:t():reshape(-1)):sum(), mask:sum()
end

-- Nats per character over a whole split, in no_grad and eval mode.
local function evaluate(set)
  model:eval()
  local inputs, targets, mask = set[1], set[2], set[3]
  local total, count = 0, 0
  tensor.no_grad(function()
    local rows, chunk = inputs:size(1), 1000
    for first = 1, rows, chunk do
      local n = math.min(chunk, rows - first + 1)
      local loss, chars = batch_loss(inputs:narrow(1, first, n), targets:narrow(1, first, n),
        mask:narrow(1, first, n))
      total, count = loss + total, chars + count
      tensor.mark_step()  -- one chunk a graph; the sums are read once at the end
    end
  end)
  model:train()
  return total:item() / count:item()
end

-- ---------------------------------------------------------------------------
-- Training, for a bounded time.

local opt = optim.Adam(model:parameters(), {lr = settings.lr})
local loader = data.DataLoader(train_set, {batch_size = settings.batch, shuffle = true, seed = settings.seed,
  drop_last = true, progress = false})
print(string.format("training: LSTM(32, %d), batch %d, Adam lr %g, for %gs%s", settings.hidden,
  settings.batch, settings.lr, settings.time,
  settings.steps > 0 and (" or " .. settings.steps .. " steps") or ""))
local start, step, running = now(), 0, nil
local done = false
while not done do
  for inputs, targets, mask in loader:iter() do
    opt:zero_grad()
    local loss, chars = batch_loss(inputs, targets, mask)
    loss = loss / chars
    loss:backward()
    opt:step()
    step = step + 1
    if step % 100 == 0 then
      running = loss:item()
      print(string.format("step %5d  %5.1fs  train loss %.3f", step, now() - start, running))
    end
    if now() - start >= settings.time or (settings.steps > 0 and step >= settings.steps) then
      done = true
      break
    end
  end
end
local seconds = now() - start

local valid_loss, test_loss = evaluate(valid_set), evaluate(test_set)
local metrics = tensor.metrics()
print(string.format("trained %d steps in %.1fs (%.1f steps/s); %d distinct graphs (%d compiled in this run, %.1fs)",
  step, seconds, step / seconds, metrics.distinct_graphs, metrics.compiles, metrics.compile_seconds))
print(string.format("validation loss: LSTM %.4f nats/char", valid_loss))
print(string.format("test loss: LSTM %.4f nats/char, bigram %.4f nats/char (%d characters)", test_loss,
  bigram_loss, characters))

-- ---------------------------------------------------------------------------
-- Sampling: a batch of words drawn a character at a time (the LSTM's
-- state carried between calls), keeping those not in the word list.

local function sample_batch(n)
  model:eval()
  local h = tensor.zeros(1, n, settings.hidden)
  local c = tensor.zeros(1, n, settings.hidden)
  local tokens = tensor.full({1, n}, BOUNDARY)
  local texts, finished = {}, {}
  for i = 1, n do texts[i] = {} end
  tensor.no_grad(function()
    for _ = 1, length do
      local logits
      logits, h, c = model(tokens, h, c)
      tensor.mark_step()  -- each character needs the last one: one graph a character
      local probs = logits:reshape(n, CLASSES):softmax(2):tolist()
      local next = {}
      for i = 1, n do
        local r, k = math.random(), 1
        while k < CLASSES and r > probs[i][k] do
          r = r - probs[i][k]
          k = k + 1
        end
        if k == BOUNDARY then finished[i] = true end
        if not finished[i] then texts[i][#texts[i] + 1] = string.char(96 + k) end
        next[i] = k
      end
      tokens = tensor.new({next})
    end
  end)
  model:train()
  local list = {}
  for i = 1, n do list[i] = table.concat(texts[i]) end
  return list
end

local samples = {}
for _ = 1, 20 do
  if #samples >= settings.samples then break end
  for _, word in ipairs(sample_batch(32)) do
    if #samples < settings.samples and #word > 0 and not known[word] then
      samples[#samples + 1] = word
      known[word] = true
    end
  end
end
print(string.format("%d sampled words not in the word list:", #samples))
for i, word in ipairs(samples) do print(string.format("%2d %s", i, word)) end
