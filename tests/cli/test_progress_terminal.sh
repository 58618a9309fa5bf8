#!/bin/bash
# test_progress_terminal.sh LAZYLUA - the progress bar on a real terminal (a
# pty of 60 columns, set with TIOCSWINSZ; COLUMNS says 200 and must lose to
# the terminal's own size): replaying the output through a small terminal
# model (columns, auto-wrap at the last column, \r, \n, ESC[K) leaves one
# line for the bar and one for what was printed after it, and no redraw is
# wider than 59 columns. Then the same at 60 columns after a resize to 40
# mid-run (the width is read at each redraw).
set -euo pipefail
lazylua=$1
case $lazylua in /*) ;; *) lazylua=$PWD/$lazylua ;; esac
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export LAZYLUA_CACHE_DIR=$work/cache HOME=$work
unset LUA_INIT LUA_INIT_5_4 LAZYLUA_PROGRESS

cat > "$work/bar.lua" <<'LUA'
local progress = require "progress"
local bar = progress.new(30, {description = "pty test", refresh = 0})
for i = 1, 30 do
  bar:set_postfix{loss = 1 / i, note = string.rep("y", 40)}
  bar:update()
  if i == 15 and arg[1] == "resize" then io.stdout:flush(); io.read("l") end
end
bar:close()
print("done")
LUA

/usr/bin/python3 - "$lazylua" "$work/bar.lua" <<'PY'
import fcntl, os, pty, struct, sys, termios

program, script = sys.argv[1], sys.argv[2]

def run(columns, resize_to=None):
    pid, fd = pty.fork()
    if pid == 0:
        os.environ["COLUMNS"] = "200"
        os.environ["TERM"] = "xterm"
        args = [program, script] + (["resize"] if resize_to else [])
        os.execv(program, args)
    fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 20, columns, 0, 0))
    output = b""
    resized = False
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:
            break
        if not chunk:
            break
        output += chunk
        if resize_to and not resized and output.count(b"\x1b[K") >= 15:
            fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", 20, resize_to, 0, 0))
            os.write(fd, b"\n")
            resized = True
    _, status = os.waitpid(pid, 0)
    if status != 0:
        sys.exit("lazylua failed: %r" % output)
    return output.decode("utf-8")

def replay(text, columns):
    """The screen rows after `text`, on a terminal `columns` wide that wraps
    at the last column (as xterm does), and the widest redraw."""
    rows, row, col, widest, current = [[]], 0, 0, 0, 0
    i = 0
    while i < len(text):
        c = text[i]
        if text.startswith("\x1b[K", i):
            del rows[row][col:]
            i += 3
            continue
        if c == "\r":
            col, current = 0, 0
        elif c == "\n":
            row += 1
            col = 0
            if row == len(rows):
                rows.append([])
        else:
            if col == columns:  # auto-wrap: the line did not fit
                row += 1
                col = 0
                if row == len(rows):
                    rows.append([])
            line = rows[row]
            while len(line) < col:
                line.append(" ")
            if col < len(line):
                line[col] = c
            else:
                line.append(c)
            col += 1
            current += 1
            widest = max(widest, current)
        i += 1
    return ["".join(r).rstrip() for r in rows if "".join(r).strip()], widest

text = run(60)
rows, widest = replay(text, 60)
if len(rows) != 2 or not rows[0].startswith("pty test 100%|") or rows[1] != "done":
    sys.exit("60 columns: the screen holds %d rows:\n%s" % (len(rows), "\n".join(rows)))
if widest > 59:
    sys.exit("60 columns: a redraw %d columns wide" % widest)
if text.count("\x1b[K") < 30:
    sys.exit("60 columns: %d redraws, expected one per step" % text.count("\x1b[K"))

# Resized to 40 after step 15: the redraws after it fit 39 columns.
text = run(60, resize_to=40)
after = text.split("\x1b[K")[16:]
widths = [len(part.split("\r")[-1]) for part in after if "\r" in part]
if not widths or max(widths) > 39:
    sys.exit("after the resize to 40 columns, redraws are %s wide" % widths)
print("progress terminal test passed")
PY
