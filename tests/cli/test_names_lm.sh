# test_names_lm.sh - scripts/names_lm.lua briefly (120 steps, or 30 s of
# training on a very busy machine) on /usr/share/dict/words (Debian's
# wamerican): it prints the LSTM's and the bigram's test losses, the LSTM's
# is below the bigram's, and it samples 20 words that are not in the word
# list. Bad command lines and a missing word list are usage errors.
source "$(dirname "$0")/lib.sh" "$@"

HERE=$(cd "$(dirname "$0")" && pwd)
SCRIPT=$HERE/../../scripts/names_lm.lua
WORDS=/usr/share/dict/words
if [ ! -r "$WORDS" ]; then
  echo "$WORDS is missing: tools/setup.sh installs Debian's wamerican" >&2
  exit 1
fi

OUT=$WORK/names.out
"$LAZYLUA" "$SCRIPT" --steps 120 --time 30 > "$OUT" 2> "$WORK/names.err"
status=$?
check "exits 0" test "$status" -eq 0
losses=$(sed -nE 's/^test loss: LSTM ([0-9.]+) nats\/char, bigram ([0-9.]+) nats\/char.*/\1 \2/p' "$OUT")
check "prints both test losses" test -n "$losses"
check "the LSTM beats the bigram" awk -v l="${losses% *}" -v b="${losses#* }" \
  'BEGIN { exit !(l + 0 > 1 && b + 0 > 2 && l + 0 < b + 0) }'
check "prints 20 samples" grep -q '^20 sampled words not in the word list:$' "$OUT"
samples=$(grep -cE '^ ?[0-9]+ [a-z]+$' "$OUT")
check "20 sample lines" test "$samples" -eq 20
new=0
while read -r _ word; do
  grep -qx "$word" "$WORDS" || new=$((new + 1))
done < <(grep -E '^ ?[0-9]+ [a-z]+$' "$OUT")
check "the samples are not in the word list" test "$new" -eq 20
check "the split is printed" grep -qE '^words: [0-9]+ lowercase a-z \(train [0-9]+, validation [0-9]+, test [0-9]+\), padded to [0-9]+$' "$OUT"
if [ "$failures" -gt 0 ]; then cat "$OUT" "$WORK/names.err"; fi

"$LAZYLUA" "$SCRIPT" --steps x > /dev/null 2> "$WORK/bad.err"
check "a bad number is a usage error" test $? -eq 2
check "naming it" grep -q 'not a number: x' "$WORK/bad.err"
"$LAZYLUA" "$SCRIPT" --epochs 3 > /dev/null 2> "$WORK/bad.err"
check "an unknown option is a usage error" grep -q 'unknown option --epochs' "$WORK/bad.err"
"$LAZYLUA" "$SCRIPT" --words "$WORK/none.txt" > /dev/null 2> "$WORK/bad.err"
check "a missing word list is named" grep -q "cannot read $WORK/none.txt" "$WORK/bad.err"
finish
