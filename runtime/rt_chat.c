/*
 * runtime/rt_chat.c — the few chat formats the runtime builds by hand
 * (rt.h). tokenizer.chat_template is Jinja; it is not interpreted, only
 * recognised by the markers it contains.
 */
#include "runtime/rt_int.h"

#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static bool has(const uint8_t *s, uint64_t n, const char *needle)
{
    const size_t k = strlen(needle);
    if (k > n) return false;
    for (uint64_t i = 0; i + k <= n; i++)
        if (s[i] == (uint8_t)needle[0] && memcmp(s + i, needle, k) == 0) return true;
    return false;
}

enum rt_chat_fmt rt_chat_detect(const struct gguf_file *f)
{
    const int64_t i = gguf_kv_find(f, "tokenizer.chat_template");
    if (i < 0) return RT_CHAT_NONE;
    const struct gguf_value *v = gguf_kv_value(f, (uint64_t)i);
    if (v->type != GGUF_VT_STRING) return RT_CHAT_NONE;
    /* Qwen3.5's generation prompt {{- '<think>\n' }}: no other ChatML
     * template writes that string alone (Qwen3's has '<think>\n\n</think>\n\n'
     * and '\n<think>\n') */
    if (has(v->data, v->n, "<|im_start|>") && has(v->data, v->n, "'<think>\\n'"))
        return RT_CHAT_CHATML_THINK;
    if (has(v->data, v->n, "<|im_start|>")) return RT_CHAT_CHATML;
    /* gpt-oss's harmony (llama.cpp: <|start|> and <|channel|>, LLM_CHAT_TEMPLATE_OPENAI_MOE) */
    if (has(v->data, v->n, "<|start|>") && has(v->data, v->n, "<|channel|>"))
        return RT_CHAT_HARMONY;
    /* Gemma 4's turns, before Gemma's <start_of_turn> */
    if (has(v->data, v->n, "<|turn>")) return RT_CHAT_GEMMA4;
    if (has(v->data, v->n, "<|start_header_id|>")) return RT_CHAT_LLAMA3;
    /* llama.cpp's llm_chat_detect_template: <|assistant|> and <|end|> is
     * Phi-3, before the zephyr test */
    if (has(v->data, v->n, "<|assistant|>") && has(v->data, v->n, "<|end|>"))
        return RT_CHAT_PHI3;
    if (has(v->data, v->n, "<|user|>")) return RT_CHAT_ZEPHYR;
    if (has(v->data, v->n, "<start_of_turn>")) return RT_CHAT_GEMMA;
    if (has(v->data, v->n, "[INST]")) return RT_CHAT_LLAMA2;
    return RT_CHAT_NONE;
}

const char *rt_chat_fmt_name(enum rt_chat_fmt fmt)
{
    switch (fmt) {
    case RT_CHAT_CHATML: return "chatml";
    case RT_CHAT_LLAMA2: return "llama2";
    case RT_CHAT_LLAMA3: return "llama3";
    case RT_CHAT_ZEPHYR: return "zephyr";
    case RT_CHAT_GEMMA: return "gemma";
    case RT_CHAT_PHI3: return "phi3";
    case RT_CHAT_CHATML_THINK: return "chatml-think";
    case RT_CHAT_CHATML_NOTHINK: return "chatml-nothink";
    case RT_CHAT_GEMMA4: return "gemma4";
    case RT_CHAT_HARMONY: return "harmony";
    default: return "none";
    }
}

enum rt_chat_fmt rt_chat_no_thinking(enum rt_chat_fmt fmt)
{
    return fmt == RT_CHAT_CHATML_THINK ? RT_CHAT_CHATML_NOTHINK : fmt;
}

__attribute__((format(printf, 3, 4))) static size_t cat(char *buf, size_t cap, const char *fmt,
                                                        ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int n = vsnprintf(buf, cap, fmt, ap);
    va_end(ap);
    return n < 0 ? 0 : (size_t)n;
}

/* llama.cpp's trim (llama-chat.cpp): isspace() in the C locale at both ends */
static bool ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static void trimmed(const char *s, const char **p, int *n)
{
    size_t a = 0, b = strlen(s);
    while (a < b && ws(s[a])) a++;
    while (b > a && ws(s[b - 1])) b--;
    *p = s + a;
    *n = b - a > (size_t)INT_MAX ? INT_MAX : (int)(b - a);
}

size_t rt_chat_format(enum rt_chat_fmt fmt, const char *role, const char *text, bool first,
                      const char *system, char *buf, size_t cap)
{
    const bool user = strcmp(role, "user") == 0;
    const bool sys = strcmp(role, "system") == 0;
    if (cap) buf[0] = '\0';
    const char *tp;
    int tn;
    trimmed(text, &tp, &tn);
    switch (fmt) {
    case RT_CHAT_CHATML:
        if (user)
            return cat(buf, cap, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", text);
        return cat(buf, cap, "<|im_start|>%s\n%s<|im_end|>\n", role, text);
    case RT_CHAT_CHATML_THINK:
    case RT_CHAT_CHATML_NOTHINK: /* Qwen3.5-4B.jinja: content|trim, then
                                    add_generation_prompt with enable_thinking */
        if (user)
            return cat(buf, cap, "<|im_start|>user\n%.*s<|im_end|>\n<|im_start|>assistant\n%s", tn,
                       tp, fmt == RT_CHAT_CHATML_THINK ? "<think>\n" : "<think>\n\n</think>\n\n");
        return cat(buf, cap, "<|im_start|>%s\n%.*s<|im_end|>\n", role, tn, tp);
    case RT_CHAT_LLAMA3: /* the template's message['content'] | trim */
        if (user)
            return cat(buf, cap,
                       "<|start_header_id|>user<|end_header_id|>\n\n%.*s<|eot_id|>"
                       "<|start_header_id|>assistant<|end_header_id|>\n\n", tn, tp);
        return cat(buf, cap, "<|start_header_id|>%s<|end_header_id|>\n\n%.*s<|eot_id|>", role,
                   tn, tp);
    case RT_CHAT_GEMMA: { /* system merged into the first user turn; trimmed */
        if (sys) return 0;
        const char *sp = "";
        int sn = 0;
        if (first && system) trimmed(system, &sp, &sn);
        return cat(buf, cap, "<start_of_turn>user\n%.*s%s%.*s<end_of_turn>\n<start_of_turn>model\n",
                   sn, sp, sn ? "\n\n" : "", tn, tp);
    }
    case RT_CHAT_GEMMA4: /* google-gemma-4-31B-it.jinja: content|trim; the
                            generation prompt with enable_thinking undefined
                            (off) closes an empty thought channel */
        if (user)
            return cat(buf, cap,
                       "<|turn>user\n%.*s<turn|>\n<|turn>model\n<|channel>thought\n<channel|>", tn,
                       tp);
        return cat(buf, cap, "<|turn>%s\n%.*s<turn|>\n", role, tn, tp);
    case RT_CHAT_HARMONY: /* llama.cpp's LLM_CHAT_TEMPLATE_OPENAI_MOE: untrimmed */
        if (user)
            return cat(buf, cap, "<|start|>user<|message|>%s<|end|><|start|>assistant", text);
        return cat(buf, cap, "<|start|>%s<|message|>%s<|end|>", role, text);
    case RT_CHAT_PHI3:
        if (user) return cat(buf, cap, "<|user|>\n%s<|end|>\n<|assistant|>\n", text);
        return cat(buf, cap, "<|%s|>\n%s<|end|>\n", role, text);
    case RT_CHAT_ZEPHYR:
        if (user) return cat(buf, cap, "<|user|>\n%s</s>\n<|assistant|>\n", text);
        return cat(buf, cap, "<|%s|>\n%s</s>\n", role, text);
    case RT_CHAT_LLAMA2:
        if (sys) return 0; /* goes inside the first [INST] */
        if (first && system && system[0])
            return cat(buf, cap, "[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", system, text);
        return cat(buf, cap, "[INST] %s [/INST]", text);
    default:
        return cat(buf, cap, "%s\n", text);
    }
}

const char *rt_chat_turn_end(enum rt_chat_fmt fmt)
{
    switch (fmt) {
    case RT_CHAT_CHATML:
    case RT_CHAT_CHATML_THINK:
    case RT_CHAT_CHATML_NOTHINK: return "<|im_end|>\n";
    case RT_CHAT_LLAMA3: return "<|eot_id|>";
    case RT_CHAT_ZEPHYR: return "</s>\n";
    case RT_CHAT_LLAMA2: return "</s><s>";
    case RT_CHAT_GEMMA: return "<end_of_turn>\n";
    case RT_CHAT_PHI3: return "<|end|>\n";
    case RT_CHAT_GEMMA4: return "<turn|>\n";
    /* the model's reply (its channels) stays in the context as generated; the
     * template closes a past assistant message with <|end|> (llama.cpp's
     * built-in fallback writes <|return|>, which is an end of generation) */
    case RT_CHAT_HARMONY: return "<|end|>";
    default: return "\n";
    }
}
