// tests/lib/hf_tokenize.js — the Hugging Face reference tokenization of a
// text file: token ids through @lenml/tokenizers (a port of Hugging Face's
// tokenizers, the self-contained bundle that tests/fixtures/fetch_tokenizers.sh
// keeps as gpt4o/tokenizer.global.js), on the tokenizer.json and
// tokenizer_config.json of an HF directory.
//
//   node hf_tokenize.js BUNDLE HF_DIR TEXTFILE...
//
// Prints the ids of each file space-separated on one line (as memwall-run
// --tokenize and llama-peer tokenize do), one line per file: one start-up of
// the 10 MB bundle and the tokenizer for all of them. Added tokens spelled in the text are matched (as
// Hugging Face always does); no special tokens are added around the text.
// The text is read as UTF-8 (invalid bytes become U+FFFD). Exit 2 on usage
// errors.
"use strict";
const fs = require("fs");
const path = require("path");
const vm = require("vm");

if (process.argv.length < 5) {
    process.stderr.write("usage: node hf_tokenize.js BUNDLE HF_DIR TEXTFILE...\n");
    process.exit(2);
}
const [bundle, dir, ...textFiles] = process.argv.slice(2);
// the bundle is an IIFE that defines GPT4OmniTokenizer; its last line is a
// source-map comment, hence the newline
vm.runInThisContext(fs.readFileSync(bundle, "utf8") + "\n;globalThis.__mwTok = GPT4OmniTokenizer;");
const tokenizerJSON = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8"));
const tokenizerConfig = JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8"));
const tok = globalThis.__mwTok.TokenizerLoader.fromPreTrained({ tokenizerJSON, tokenizerConfig });
for (const f of textFiles) {
    const text = fs.readFileSync(f, "utf8");
    process.stdout.write(tok.encode(text, { add_special_tokens: false }).join(" ") + "\n");
}
