"""Chapter 23 (KV 缓存压缩：量化与驱逐): the lesson's claims hold, the self-check is right, the assignment grades.

What the lesson's cells leave shows, on SmolLM2-135M-Instruct reading the first 256 tokens of a section of the Python
documentation as its prompt (perplexity over the next 128 tokens, run in one step over the compressed cache): the
cached keys (after RoPE) have outlier channels in every layer but layer 0, in the slowest-turning RoPE pairs, the
values do not; per-group quantization keeps its error within half a step and stores b + 1 bits per number at groups
of 32 with float16 scales and minima (the byte target 0.30 holds at groups of 64 or with a 4-bit zero point); keys
quantized per token cost more than per channel at every width; at budgets of 64 and 128 keys per head the eviction
rules give close perplexities, while only SnapKV recovers a number stated early in a long prompt.  The self-check's
facts are checked, and the assignment, which needs no model, is generated, submitted and autograded by nbgrader.
"""

from __future__ import annotations

import re

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from grading import runner

ASSIGNMENT = "ch23-kv-compression"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


# --------------------------------------------------------------------------- the page

def test_page_opens_from_earlier_chapters_and_cites_the_papers():
    body = prose(CHAPTER)
    opening = body[:body.index("## 键有离群通道，值没有")]
    for doc in ("ch11-kv-cache", "ch20-serving", "ch22-sinks"):
        assert f"{{doc}}`{doc}`" in opening, doc
    assert "KIVI（Liu 等，2024）" in body and "H2O**（Zhang 等，2023）" in body and "SnapKV**（Li 等，2024）" in body
    assert "SnapKVCluster.update_kv" in body and "论文在解码的每一步驱逐" in body
    assert "{doc}`ch24-speculative`" in section(body, "小结")
    for page in ("ch11-kv-cache", "ch20-serving", "ch22-sinks"):  # the forward links
        assert "{doc}`ch23-kv-compression`" in prose(ROOT / "book" / f"{page}.md"), page


def test_the_conditions_of_every_measurement_are_stated():
    body, source = prose(CHAPTER), _source()
    assert 'topics["execmodel"]' in source and "[:384]" in source and "P, T = 256, 128" in source
    assert "torch.set_num_threads(1)" in source and "seed" not in body.lower() and "种子" not in body
    assert "{glue:text}`ch23_p`" in body and "{glue:text}`ch23_scored`" in body
    assert "positions=torch.arange(P, P + T)" in source  # new tokens at their original positions
    assert "BUDGETS, SINKS, WINDOW = (64, 128), 4, 16" in source and "recent=budget // 2" in source
    assert "kernel_size=5" in source and "本章取 $w = 16$" in body and "本章取 $r = B/2$" in body
    assert "optim" not in source and "backward" not in source
    # the one-step protocol: only the prompt's cache is compressed; H2O's one choice after the prefill is its code's
    assert "不受量化，也不受驱逐的预算限制" in body and "H2OKVCache_LayerWise" in body and "residual_length" in body
    assert "不像 StreamingLLM 那样按缓存里的槽号重新旋转" in body  # chapter 22's slot positions are not used here
    # SnapKV's observation window holds the question and the answer's opening words: asserted for every fact
    assert 'assert window.startswith("What is the secret number?")' in source and "{glue:text}`ch23_window`" in body
    assert "model.rope_base == 100000 and D == 64" in source and "100000^{-2i/64}" in body


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_keys_have_outlier_channels_in_the_slow_rope_pairs(chapter):
    g, k, v = chapter["glued"], chapter["k_spread"], chapter["v_spread"]
    assert k.shape == v.shape == (30,) and g["ch23_wider"] == 29 and k[0] < v[0]  # "除第 0 层以外"
    assert g["ch23_k_spread_min"] == pytest.approx(k[1:].min()) and g["ch23_k_spread_min"] > 2 * g["ch23_v_spread_med"]
    assert 16 <= g["ch23_pair_lo"] <= g["ch23_pair_hi"] < g["ch23_pairs"] == 32
    assert g["ch23_angle"] == pytest.approx(256 * 100000 ** (-2 * g["ch23_pair_lo"] / 64))
    fig = chapter["channel_fig"]
    assert_draws_without_warnings(fig)
    assert fig.axes[0].get_xlabel() == "通道" and fig.axes[1].get_xlabel() == "层"


def test_bytes_are_the_formula_and_the_030_target_is_taught_exactly(chapter):
    g = chapter["glued"]
    assert g["ch23_numbers"] == 30 * 2 * 3 * 64
    for bits in (8, 4, 2):
        assert g[f"ch23_bytes_{bits}"] == g["ch23_numbers"] * (bits + 1) // 8
        assert g[f"ch23_ratio_{bits}"] == (bits + 1) / 16
    assert g["ch23_bytes_16"] == 2 * g["ch23_numbers"]
    assert g["ch23_ratio_4"] == 0.3125 > 0.30 > g["ch23_ratio_zero"] == 4.625 / 16 > g["ch23_ratio64"] == 0.28125


@pytest.mark.cjk_font
def test_keys_per_token_cost_more_than_per_channel(chapter):
    g = chapter["glued"]
    for bits in (8, 4, 2):
        assert g[f"ch23_err_tok_{bits}"] > 2 * g[f"ch23_err_ch_{bits}"]
    for bits in (8, 4):
        for key in ("ch", "tok"):
            assert abs(g[f"ch23_ppl_{key}_{bits}"] / g["ch23_ppl_full"] - 1) * 100 <= g["ch23_ppl_small"] < 1
    assert g["ch23_ppl_tok_2"] > 1.5 * g["ch23_ppl_ch_2"] > g["ch23_ppl_full"]
    assert_draws_without_warnings(chapter["quant_fig"])


@pytest.mark.cjk_font
def test_eviction_perplexities_are_close_and_only_snapkv_recalls(chapter):
    g = chapter["glued"]
    ppl = {(m, b): g[f"ch23_ppl_{m}_{b}"] for m in ("streamingllm", "h2o", "snapkv") for b in (64, 128)}
    assert all(g["ch23_ppl_full"] < p < 1.3 * g["ch23_ppl_full"] for p in ppl.values())  # "彼此差得不多"
    best = {b: min(("streamingllm", "h2o", "snapkv"), key=lambda m, b=b: ppl[m, b]) for b in (64, 128)}
    assert best[64] == best[128] == "h2o" and g["ch23_lowest"].endswith("H2O")
    assert g["ch23_hits_snapkv_128"] > max(g["ch23_hits_h2o_128"], g["ch23_hits_streamingllm_128"])
    assert g["ch23_others"] == "另外两种方法一个也没有答对" and g["ch23_kept_snapkv"] > 0 == g["ch23_kept_h2o"]
    assert chapter["hits"]["full"] == g["ch23_facts"] == 6
    assert_draws_without_warnings(chapter["evict_fig"])


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_quantization_arithmetic():
    q = anp.quantize_kv(np.array([[0.2, 1.0, -0.6, 0.6]]), 2, axis=-1, group_size=4)
    assert q.scale[0, 0] == pytest.approx(1.6 / 3) and q.codes[0, 1] == 3
    assert correct(questions(ASSIGNMENT)[0]) == ["$s = 1.6/3 \\approx 0.533$，编码 3"]
    assert anp.quantized_nbytes(3200, 4, group_size=32) / 6400 == 5 / 16
    assert correct(questions(ASSIGNMENT)[1]) == ["$5/16 = 0.3125$"]


def test_selfcheck_facts_of_the_lesson(chapter):
    g = chapter["glued"]
    assert g["ch23_wider"] == 29 and g["ch23_pair_lo"] >= 16 and g["ch23_err_tok_4"] > g["ch23_err_ch_4"]
    assert g["ch23_ppl_small"] < 1 and g["ch23_kept_snapkv"] > 0 == g["ch23_kept_streamingllm"]
    assert [len(correct(q)) for q in questions(ASSIGNMENT)] == [1, 1, 2, 1]


# --------------------------------------------------------------------------- the assignment

def test_the_exercises_need_no_model():
    from nbrun import source_notebook

    text = "\n".join(c.source for c in source_notebook(ASSIGNMENT).cells if c.cell_type == "code")
    assert "pretrained" not in text and "load_smollm2" not in text and "LlamaModel" not in text


DELEGATING = {
    "quantize": "def quantize(x, bits, group_size):\n"
                "    q = anp.quantize_kv(x, bits, axis=-1, group_size=group_size)\n"
                "    return q.codes, q.scale, q.minimum\n\n\n"
                "def dequantize(codes, scale, minimum, group_size):\n"
                "    q = anp.QuantizedKV(np.asarray(codes, np.uint8), scale, minimum, 8, codes.ndim - 1, group_size)\n"
                "    return anp.dequantize_kv(q)\n",
    "h2o_keep": "def h2o_keep(scores, budget, recent):\n"
                "    n = len(scores)\n"
                "    return anp.h2o_keep(anp.softmax(scores, mask=np.tril(np.ones((n, n), bool))), budget,\n"
                "                        recent=recent)\n",
    "kivi": "def kivi_roundtrip(keys, values, bits, group_size):\n"
            "    k = anp.quantize_kv(keys, bits, axis=-2, group_size=group_size)\n"
            "    v = anp.quantize_kv(values, bits, axis=-1, group_size=group_size)\n"
            "    return anp.dequantize_kv(k), anp.dequantize_kv(v)\n\n\n"
            "def compressed_bytes(n_layers, n_kv_heads, n_tokens, d_head, bits, group_size):\n"
            "    return 2 * anp.quantized_nbytes(n_layers * n_kv_heads * n_tokens * d_head, bits,\n"
            "                                    group_size=group_size)\n",
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "levels_2b", "ties_to_older", "codes_only")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's quantization, keep sets and byte formula behind the student's names score 0
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        # right, but every call prints to stderr, warns and writes to fd 2
        "noisy": runner.sheet(source, "noisy"),
    }, {
        "delegating": [0, 0, 0],
        # levels_2b and codes_only miss their exercises' points (capped at a third); ties_to_older is an edge case
        "mixed": [1, 3 * 10 / 11, 2 / 3],
        "noisy": [3, 3, 2],
    })  # 8 autograded + the written answer (2, by hand)


MEAN_TOTALS = (
    "def h2o_keep(scores, budget, recent):\n"
    "    if not 0 <= recent <= budget:\n"
    "        raise ValueError('recent')\n"
    "    n = len(scores)\n"
    "    if budget >= n:\n"
    "        return np.arange(n)\n"
    "    s = np.where(np.tril(np.ones((n, n), dtype=bool)), scores, -np.inf)\n"
    "    w = np.exp(s - s.max(axis=-1, keepdims=True))\n"
    "    totals = (w / w.sum(axis=-1, keepdims=True)).sum(axis=0) / (n - np.arange(n))\n"
    "    order = sorted(range(n - recent), key=lambda j: (-totals[j], -j))\n"
    "    return np.sort(order[:budget - recent] + list(range(n - recent, n)))\n")


def test_a_hint_names_only_what_the_function_did():
    """The keys quantized per token equal that mistake's model: the check names it; a function that forgets the
    minimum in dequantize is named by the check of dequantize, and the quantize checks stay silent."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "keys_per_token.py")
    _, out = execute(nb, replace=kept.cells, hidden=False)
    first = re.search(r"✗ 【要点】2 个头.*?(?=\n[✓✗])", out["test_kivi"], re.S).group(0)
    assert "键按词元量化了" in first
    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "no_minimum.py")
    _, out = execute(nb, replace=kept.cells, hidden=False)
    assert "还原时没有加回每组的最小值" in out["test_quantize"] and "整个张量" not in out["test_quantize"]
    # H2O's totals averaged over the queries that see each key: a mistake no model describes, so no hint names one
    _, out = execute(nb, replace={"h2o_keep": MEAN_TOTALS}, hidden=True)
    assert "未通过" in out["test_h2o_keep"] and "提示" not in out["test_h2o_keep"]
