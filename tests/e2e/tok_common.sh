# tests/e2e/tok_common.sh — sourced by tok_peer.sh, tok_family_peer.sh and tok_chat_peer.sh
# (after common.sh; needs RUNBIN, PEER, T, MW_EMU and fail()).
#
# tok_same LABEL OURS_TEXT THEIR_TEXT GGUF [FLAGS...]: the ids of
# `memwall-run --tokenize OURS_TEXT FLAGS` and `llama-peer tokenize
# THEIR_TEXT FLAGS` (llama-tokenize's --no-bos / --parse-special) on GGUF
# must be identical. Sets TOK_N to the number of ids on success, 0
# otherwise; on a difference prints the first differing id with context.
# TOK_OURS_GGUF, when set, is the file memwall-run tokenizes with instead of
# GGUF (a twin carrying GGUF's tokenizer for an architecture it cannot run).
tok_same() {
    local label=$1 ours=$2 theirs=$3 f=$4
    shift 4
    TOK_N=0
    if ! $MW_EMU "$RUNBIN" -m "${TOK_OURS_GGUF:-$f}" --tokenize "$ours" -q "$@" > "$T/ours" 2> "$T/ours.err"; then
        fail "$label: memwall-run --tokenize $*: $(tail -n 2 "$T/ours.err")"
        return
    fi
    if ! "$PEER" tokenize "$f" "$theirs" "$@" > "$T/theirs" 2> "$T/theirs.err"; then
        fail "$label: llama-peer tokenize $*: $(tail -n 2 "$T/theirs.err")"
        return
    fi
    local n
    n=$(wc -w < "$T/theirs")
    if cmp -s "$T/ours" "$T/theirs"; then
        TOK_N=$n
        return
    fi
    fail "$label [$*]: tokenization differs from llama.cpp's ($(wc -w < "$T/ours") ids vs $n)"
    tr ' ' '\n' < "$T/ours" > "$T/ours.l"
    tr ' ' '\n' < "$T/theirs" > "$T/theirs.l"
    local at
    at=$(cmp "$T/ours.l" "$T/theirs.l" 2> /dev/null | awk '{ print $NF }')
    [ -n "$at" ] || at=1
    echo "    from id #$at: ours   $(tail -n +"$at" "$T/ours.l" | head -n 12 | tr '\n' ' ')"
    echo "    from id #$at: llama  $(tail -n +"$at" "$T/theirs.l" | head -n 12 | tr '\n' ' ')"
}
