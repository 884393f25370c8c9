#!/usr/bin/env bash
# memwall-run when the context of a recurrent model (qwen35: gated delta net
# layers, one state for the whole sequence) fills up. A recurrent state
# cannot drop positions, so there is no context shift; as llama.cpp does for
# such memory (common_init disables ctx_shift; llama-completion then stops
# with "context full and context shift is disabled", llama-cli's /clear
# starts the conversation over with the system prompt):
#  - -n past --ctx: exit 0 after the context's last position, a message
#    that says so, and the same greedy tokens as with a context that holds
#    them all (n_ctx - prompt + 1 of them: the last one is not fed);
#  - a chat longer than --ctx: the conversation is cleared (the system
#    prompt fed again) and the chat goes on, exit 0; the reply to the turn
#    after a clear equals a fresh chat's reply to that turn (the state was
#    really reset, nothing of the earlier turns leaks).
# Fixture: rt_mkmodel's qwen35 (hidden 64, 4 layers: 3 recurrent, 1 gated
# attention; byte-level BPE vocabulary), F16.
#
#   run_recurrent_ctx.sh RT_MKMODEL
source "$(dirname "${BASH_SOURCE[0]}")/run_common.sh"
MK=${1:?usage: run_recurrent_ctx.sh RT_MKMODEL}
f="$T/q35.gguf"
$MW_EMU "$MK" model "$f" --arch qwen35 --layers 4 --gpt2 --type f16 --seed 7 > "$T/e" 2>&1 ||
    { fail "rt_mkmodel: $(tail -2 "$T/e")"; finish; }

# --- generation past the context ---
CTX=32
printf '%s' "$PROMPT" > "$T/prompt.txt"
mr 0 -m "$f" --tokenize "$T/prompt.txt" -q
np=$(wc -w <<< "$out")
want=$((CTX - np + 1))
if mr 0 -m "$f" -p "$PROMPT" -n 200 --ctx $CTX --temp 0 --ignore-eos --tokens -q -t 2; then
    got=$(wc -w <<< "$out")
    echo "  -n 200 --ctx $CTX, prompt $np tokens: $got tokens, exit 0"
    [ "$got" -eq "$want" ] || fail "generated $got tokens, expected $want (context $CTX - prompt $np + 1)"
    has "$err" "context full at $CTX positions after $want generated tokens" "the stop message"
    has "$err" "no context shift" "the stop message"
    short=$out
    mr 0 -m "$f" -p "$PROMPT" -n "$want" --ctx 128 --temp 0 --ignore-eos --tokens -q -t 2
    [ "$out" = "$short" ] || fail "the tokens before the stop differ from a run with --ctx 128"
fi

# --- a chat longer than the context ---
# turn 1 fills most of --ctx 48, so turn 2 finds no room: the conversation is
# cleared (at turn 1's end or before turn 2) and turn 2 starts on a fresh
# state after the system prompt, exactly as in a chat that begins with it
chat() { # chat OUT_PREFIX LINES...: memwall-run -i on the lines
    local o=$1
    shift
    printf '%s\n' "$@" > "$T/chat.in"
    $MW_EMU "$RUNBIN" -m "$f" -i --ctx 48 -n 6 --temp 0 --ignore-eos --tokens --system "be brief" -t 2 \
        < "$T/chat.in" > "$o.out" 2> "$o.err"
}
long="the cat sat on the mat and looked at the dog"
chat "$T/a" "$long" "and then" "what next"
rc=$?
[ $rc -eq 0 ] || fail "chat: exit $rc: $(tail -3 "$T/a.err")"
n_clear=$(grep -c "conversation cleared" "$T/a.err")
n_reply=$(grep -c . "$T/a.out")
echo "  chat of 3 turns at --ctx 48: exit $rc, $n_reply replies, $n_clear clears"
[ "$n_clear" -ge 1 ] || fail "chat: the conversation was never cleared: $(cat "$T/a.err")"
[ "$n_reply" -eq 3 ] || fail "chat: $n_reply replies to 3 turns: $(cat "$T/a.out")"
chat "$T/b" "and then"
rc=$?
[ $rc -eq 0 ] || fail "chat (fresh): exit $rc: $(tail -3 "$T/b.err")"
a2=$(sed -n 2p "$T/a.out" | xargs)
b1=$(sed -n 1p "$T/b.out" | xargs)
echo "  the reply to turn 2 after the clear: '$a2'; a fresh chat's: '$b1'"
[ -n "$a2" ] && [ "$a2" = "$b1" ] || fail "chat: the reply after the clear differs from a fresh chat's"
finish
