"""Chapter 17 (多头潜在注意力): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: the naive, absorbed and token-by-token cached MLA agree in float64; absorption is
associativity (the head-0 scores agree); RoPE on the reconstructed keys breaks it everywhere but at key 0, far
beyond rounding; the cache per token and layer is 2 h d_head, 2 h_kv d_head, 2 d_head and d_latent + d_rope,
which for DeepSeek-V2's settings is GQA with 2.25 groups; the FLOPs of a decoding step are counted both ways
(and of a prefill, where absorption computes more), and the absorbed step, timed here, is faster, with its
sentences picked by the measured ratios.  The self-check's facts are checked with attnlib, and the assignment
is generated, submitted and autograded by nbgrader.
"""

from __future__ import annotations

import re

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, assert_draws_without_warnings, code_cells, prose, section

from attnlib import numpy as anp
from attnlib import torch as att

ASSIGNMENT = "ch17-mla"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


def _source() -> str:
    return "\n".join(code_cells(CHAPTER))


def _weights(seed=0, h=3, d_head=4, d_rope=2, d_latent=6, d_q=5, d_model=12) -> dict:
    rng = np.random.default_rng(seed)
    shapes = {"w_dq": (d_model, d_q), "w_uq": (d_q, h * d_head), "w_qr": (d_q, h * d_rope),
              "w_dkv": (d_model, d_latent), "w_uk": (d_latent, h * d_head), "w_uv": (d_latent, h * d_head),
              "w_kr": (d_model, d_rope), "w_o": (h * d_head, d_model)}
    return {n: rng.normal(size=s) / np.sqrt(s[0]) for n, s in shapes.items()}


def _explicit(x, w, h, *, width=None):
    """Causal MLA head by head from the formulas, scaled by sqrt(width) (default d_head + d_rope)."""
    d_head, d_rope, n = w["w_uq"].shape[1] // h, w["w_kr"].shape[1], x.shape[-2]
    c_q, c_kv = x @ w["w_dq"], x @ w["w_dkv"]
    k_r = anp.apply_rope(x @ w["w_kr"])
    heads = []
    for i in range(h):
        cols, rope = slice(i * d_head, (i + 1) * d_head), slice(i * d_rope, (i + 1) * d_rope)
        q = np.concatenate([c_q @ w["w_uq"][:, cols], anp.apply_rope(c_q @ w["w_qr"][:, rope])], -1)
        k = np.concatenate([c_kv @ w["w_uk"][:, cols], k_r], -1)
        s = np.where(np.tril(np.ones((n, n), bool)), q @ k.T / np.sqrt(width or d_head + d_rope), -np.inf)
        p = np.exp(s - s.max(-1, keepdims=True))
        heads.append(p / p.sum(-1, keepdims=True) @ (c_kv @ w["w_uv"][:, cols]))
    return np.concatenate(heads, -1) @ w["w_o"]


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapters_11_15_16_and_follows_deepseek_v2():
    body = prose(CHAPTER)
    opening = body[:body.index("## 缓存一个潜在向量")]
    for link in ("{doc}`ch11-kv-cache`", "{doc}`ch16-gqa`", "{doc}`ch15-positions`"):
        assert link in opening, link
    assert "DeepSeek-V2" in opening and "2.1 节" in opening
    formula = section(body, "缓存一个潜在向量")
    assert "RMSNorm" in formula and "省去" in formula  # the latents' RMSNorm is left out, and said so
    assert "缓存大小和吸收" in formula  # what leaving it out changes: neither


def test_the_toc_lists_this_chapter_first_in_part_6():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    part = next(p for p in toc["parts"] if p["caption"] == "第六部分 前沿")
    assert part["chapters"][0] == {"file": "book/ch17-mla", "title": "17. 多头潜在注意力（MLA）"}
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第五部分 进阶") < captions.index("第六部分 前沿") < captions.index("附录")


def test_chapters_11_and_16_lead_here():
    for name in ("ch11-kv-cache", "ch16-gqa"):
        assert "{doc}`ch17-mla`" in prose(ROOT / "book" / f"{name}.md"), name
    assert "{doc}`ch17-mla`" in section(prose(ROOT / "book" / "ch16-gqa.md"), "小结")


def test_the_measurement_is_described_as_it_is_done():
    body, source = prose(CHAPTER), _source()
    measured = section(body, "一步解码：吸收省了什么，花了什么")
    assert "torch.set_num_threads(1)" in source and "只用一个线程" in measured
    assert "本机" in measured and "{glue:text}`ch17_cpus`" in measured  # the machine's facts are glued
    assert "取最快的一次" in measured and "range(5)" in source and "5 步" in measured
    assert "本书不说快慢的原因" in measured  # no cause the measurement does not isolate
    assert "mla._step(x1, tw, th" in source and "absorb=False" in source and "att.latent_attention_step(" in source
    assert "GPU" not in body


def test_the_report_is_quoted_as_theirs():
    cache = section(prose(CHAPTER), "缓存里每个词元存多少个数")
    assert "报告的说法是，MLA 的缓存“相当于只有 {glue:text}`ch17_groups:.2f` 组的 GQA”" in cache
    assert "本书量不出来" in cache  # their claim about quality is theirs


# --------------------------------------------------------------------------- the lesson's claims

@pytest.mark.cjk_font
def test_naive_absorbed_and_decoded_agree(chapter):
    assert chapter["worst"] < 1e-12
    np.testing.assert_allclose(chapter["naive"], _explicit(chapter["x"], chapter["w"], 4), rtol=1e-12, atol=1e-12)
    assert chapter["decoded"].shape == chapter["naive"].shape == (10, 32)
    assert chapter["glued"]["ch17_cache_bytes"] == chapter["cache"].nbytes == 10 * (16 + 4) * 8
    assert chapter["glued"]["ch17_agree_sentence"] == chapter["agree"].pick(chapter["worst"])
    assert chapter["gap_absorb"] < 1e-12 and chapter["q_lat0"].shape == (10, 16)


@pytest.mark.cjk_font
def test_rope_on_the_reconstructed_keys_cannot_be_absorbed(chapter):
    per_key = chapter["per_key"]
    assert per_key.shape == (64,) and per_key[0] < 1e-12  # key 0 is not rotated
    assert per_key[1:].min() > 0.01 and chapter["glued"]["ch17_rope_gap"] == per_key.max() > 0.1
    fig = chapter["rope_fig"]
    assert_draws_without_warnings(fig)
    ax = fig.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == ("键的位置 s", "分数的相对误差")


@pytest.mark.cjk_font
def test_the_cache_per_token_and_layer(chapter):
    g = chapter["glued"]
    assert (g["ch17_ds_mha"], g["ch17_ds_mla"]) == (2 * 128 * 128, 512 + 64)
    assert g["ch17_groups"] == 2.25 == (512 + 64) / (2 * 128)  # DeepSeek-V2's "GQA with about 2.25 groups"
    assert g["ch17_ds_share"] == 576 / 32768
    assert (g["ch17_ours_mha"], g["ch17_ours_gqa8"], g["ch17_ours_mqa"]) == (8192, 2048, 256)
    assert (g["ch17_mha_gib"], g["ch17_mla_gib"]) == (16, 1.125)
    assert g["ch17_per_head_rope"] == 512 + 128 * 64
    cache = att.LatentKVCache(32, 512, 64)  # what a real cache holds: 32 layers, batch 8, one token, float16
    for layer in range(32):
        cache.append(layer, torch.zeros(8, 1, 512, dtype=torch.float16), torch.zeros(8, 1, 64, dtype=torch.float16))
    assert cache.nbytes * 4096 == g["ch17_mla_gib"] * 2**30
    kv = att.KVCache(1, 32, 128)  # chapter 11's model, one layer, one token
    x = torch.zeros(1, 32, 1, 128)
    kv.append(0, x, x)
    assert kv.nbytes == g["ch17_ours_mha"] * 4
    fig = chapter["cache_fig"]
    assert_draws_without_warnings(fig)
    assert [b.get_width() for b in fig.axes[0].patches] == [576, 256, 512, 2048, 8192]


@pytest.mark.cjk_font
def test_the_decoding_step_counted_and_timed(chapter):
    """FLOPs from the formula in the text; the absorbed step is faster than the naive one (in runs here 14-17x,
    the margin far below); the sentences are the ones the measured ratios pick."""
    g = chapter["glued"]
    n, h, d_head, d_rope, d_latent = 4096, 128, 128, 64, 512
    naive = 4 * n * h * d_latent * d_head + 2 * h * n * (d_head + d_rope) + 2 * h * n * d_head
    absorbed = 4 * h * d_head * d_latent + 2 * h * n * (d_latent + d_rope) + 2 * h * n * d_latent
    assert g["ch17_ds_naive_gflops"] == pytest.approx(naive / 1e9)
    assert g["ch17_ds_absorbed_gflops"] == pytest.approx(absorbed / 1e9)
    assert g["ch17_per_token_cost"] == pytest.approx(1088 / 320)
    assert g["ch17_prefill_ratio"] > 1  # a prefill computes more absorbed than naive
    speed = chapter["speed"]
    assert speed > 2 and chapter["best"]["naive"] > chapter["best"]["absorbed"]
    assert g["ch17_speed_sentence"] == chapter["faster"].pick(speed)
    assert g["ch17_versus_sentence"] == chapter["versus"].pick(speed / chapter["flop_ratio"])
    assert g["ch17_naive_ms"] == pytest.approx(chapter["best"]["naive"] * 1e3)
    assert all(c.length == 4096 + 5 for c in chapter["caches"].values())  # five steps each, on its own cache


def test_the_pitfalls_hold():
    w = _weights(3)
    x = np.random.default_rng(4).normal(size=(8, 12))
    right = anp.multi_head_latent_attention(x, w, 3)
    np.testing.assert_allclose(right, _explicit(x, w, 3), rtol=1e-12, atol=1e-12)
    assert np.abs(_explicit(x, w, 3, width=4) - right).max() > 1e-2  # sqrt(d_head) is another model
    cache = anp.LatentKVCache(1, 6, 2)
    anp.latent_attention_step(x[:7], w, 3, cache, 0)
    step = anp.latent_attention_step(x[7:], w, 3, cache, 0)
    np.testing.assert_allclose(step, right[7:], rtol=1e-12, atol=1e-12)
    at_zero = anp.multi_head_latent_attention(x, w, 3, positions=np.r_[np.arange(7), 0])
    assert np.abs(at_zero[7] - right[7]).max() > 1e-2  # the new token rotated at 0
    body = prose(CHAPTER)
    assert "`k_cache` 和 `v_cache`" in section(body, "常见的坑")  # DeepSeek-V3's naive mode caches per head


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_cache_numbers():
    cache = anp.LatentKVCache(1, 512, 64)
    cache.append(0, np.zeros((1, 512), np.float16), np.zeros((1, 64), np.float16))
    assert cache.nbytes // 2 == 576
    assert correct(questions(ASSIGNMENT)[0]) == ["576"]
    assert 512 + 128 * 64 == 8704 and 2 * 128 * 128 == 32768  # the slips


def test_selfcheck_scale():
    w = _weights(5, d_latent=10)
    x = np.random.default_rng(6).normal(size=(6, 12))
    got = anp.multi_head_latent_attention(x, w, 3, absorb=True)
    np.testing.assert_allclose(got, _explicit(x, w, 3), rtol=1e-12, atol=1e-12)
    for width in (4, 10 + 2, 10):  # d_head, d_latent + d_rope, d_latent
        assert np.abs(_explicit(x, w, 3, width=width) - got).max() > 1e-3
    assert correct(questions(ASSIGNMENT)[1]) == ["$\\sqrt{d_{\\text{head}} + d_{\\text{rope}}}$"]


def test_selfcheck_absorption():
    w = _weights(7)
    x = np.random.default_rng(8).normal(size=(5, 12))
    np.testing.assert_allclose(anp.multi_head_latent_attention(x, w, 3, absorb=True),
                               anp.multi_head_latent_attention(x, w, 3), rtol=1e-12, atol=1e-12)  # B is wrong
    n, h, d_head, d_rope, d_latent = 4096, 128, 128, 64, 512  # D is wrong: a prefill of n queries
    naive = 4 * n * h * d_latent * d_head + n * (2 * h * n * (d_head + d_rope) + 2 * h * n * d_head)
    absorbed = n * 4 * h * d_head * d_latent + n * (2 * h * n * (d_latent + d_rope) + 2 * h * n * d_latent)
    assert absorbed > naive
    assert len(correct(questions(ASSIGNMENT)[2])) == 2


def test_selfcheck_decoding_position():
    w = _weights(9)
    x = np.random.default_rng(10).normal(size=(5, 12))
    cache = anp.LatentKVCache(1, 6, 2)
    anp.latent_attention_step(x[:4], w, 3, cache, 0)
    anp.latent_attention_step(x[4:], w, 3, cache, 0)
    np.testing.assert_allclose(cache.read(0)[1][4], anp.apply_rope(x @ w["w_kr"])[4], rtol=1e-12)  # at t = 4
    assert correct(questions(ASSIGNMENT)[3]) == ["位置 $t$"]


# --------------------------------------------------------------------------- the assignment

DELEGATING = {
    "mla_attention": "def mla_attention(x, weights, n_heads):\n"
                     "    return anp.multi_head_latent_attention(x, weights, n_heads)\n",
    "absorbed_scores": "def absorbed_scores(q_c, q_r, c_kv, k_r, w_uk):\n"
                       "    from attnlib.numpy import mla\n"
                       "    return mla._absorbed_attention(q_c, q_r, c_kv, k_r, {'w_uk': w_uk, 'w_uv': w_uk}, False)\n",
    "decode_step": "def decode_step(x_new, weights, n_heads, c_cache, r_cache):\n"
                   "    cache = anp.LatentKVCache(1, c_cache.shape[1], r_cache.shape[1])\n"
                   "    if len(c_cache):\n"
                   "        cache.append(0, c_cache, r_cache)\n"
                   "    out = anp.latent_attention_step(x_new[None], weights, n_heads, cache, 0)\n"
                   "    return (out[0], *cache.read(0))\n",
}

NOISE = """
import functools
import os
import sys
import warnings


def noisy(func):
    @functools.wraps(func)
    def run(*args, **kwargs):
        print("调试：", func.__name__, file=sys.stderr)
        os.write(2, "调试：写到文件描述符 2\\n".encode())
        warnings.warn("这是学生代码里的一个警告")
        return func(*args, **kwargs)

    return run
"""
ANSWERS = ("mla_attention", "absorbed_scores", "cache_bytes", "decode_step")


def _noisy_cells() -> dict:
    """The model answers, every function wrapped to print to stderr, write to file descriptor 2 and warn on each
    call; the first answer also wraps the setup cell's make_weights (the test cells no longer call it, so its noise
    cannot reach a test cell's stderr: nbgrader zeroes a cell with any)."""
    model = assignments.model_cells(ASSIGNMENT)
    cells = {name: NOISE + re.sub(r"^[ \t]*### (BEGIN|END) SOLUTION[^\n]*\n?", "", model[name], flags=re.M)
             + f"\n\n{name} = noisy({name})\n" for name in ANSWERS}
    cells["mla_attention"] += "make_weights = noisy(make_weights)\n"
    return cells


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "rope_on_reconstructed_keys", "absorbed_keys_reconstructed",
                                    "bytes_rope_key_per_head", "decode_rope_at_zero")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's MLA behind the student's names scores 0 where it is the function under test
        "delegating": assignments.with_cells(source, DELEGATING),
        "mixed": assignments.with_cells(source, mixed),
        "noisy": assignments.with_cells(source, _noisy_cells()),
    }, {
        "delegating": [0, 0, 2, 0],
        # each misses its exercise's point, so a failed essential check caps its cell at a third
        "mixed": [3 / 7, 1, 2 / 3, 1],
        # right, but every function (and the setup's make_weights) prints, writes to fd 2 and warns: full marks
        "noisy": [3, 3, 2, 3],
    })  # 11 autograded + the written answer (2, by hand)


def test_the_written_answer_follows_the_lesson():
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    answer = cells["written_mla"]
    assert "2.25" in answer and "283,115,520" in answer and 60 * 4096 * 576 * 2 == 283_115_520
    assert 60 * 4096 * 32768 * 2 == 15 * 2**30 and "15 GiB" in answer
    assert "只有位置 0 的键碰巧相同" in answer and "吸收反而多算" in answer
    # a prefill's projections cost the same both ways; the excess is the scoring in the latent width
    n, h, d_head, d_rope, d_latent = 4096, 128, 128, 64, 512
    assert 4 * n * h * d_latent * d_head == n * 4 * h * d_head * d_latent and "这两项投影一样多" in answer
    assert (2 * d_latent + d_rope, 2 * d_head + d_rope) == (1088, 320) and "1088" in answer and "320" in answer
    assert (2 * d_latent + d_rope) / (2 * d_head + d_rope) == 3.4 and "贵 3.4 倍" in answer
    proj = 4 * n * h * d_latent * d_head
    naive = proj + n * (2 * h * n * (d_head + d_rope) + 2 * h * n * d_head)
    absorbed = proj + n * (2 * h * n * (d_latent + d_rope) + 2 * h * n * d_latent)
    assert f"{absorbed / naive:.1f}" == "3.2" and "约是重建的 3.2 倍" in answer
    assert "吸收却要每个查询各乘一次" not in answer  # the projections are not where the excess comes from


def test_the_absorbed_scores_check_names_only_what_the_function_did():
    """sqrt(d_head - d_rope) used to be named sqrt(d_latent + d_rope) where the two coincided (32 - 8 = 16 + 8): no
    model is that mistake now, so the checks report what they saw; the latent width is still named when it is the
    mistake.  Rebuilding one head's keys at a time fails the memory check (its limit is one head's keys)."""
    from nbrun import execute, read_kept, source_notebook

    nb = source_notebook(ASSIGNMENT)
    printed = {}
    for name in ("absorbed_scale_head_minus_rope", "absorbed_scale_latent_width", "absorbed_keys_one_head_at_a_time"):
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        scores, out = execute(nb, replace=kept.cells, hidden=False)
        printed[name] = out["test_absorbed_scores"]
        assert scores["test_absorbed_scores"] <= 1, (name, printed[name])
    assert "提示" not in printed["absorbed_scale_head_minus_rope"], printed
    assert "个数不一致" in printed["absorbed_scale_head_minus_rope"]
    assert printed["absorbed_scale_latent_width"].count("分数除以了 √(d_latent + d_rope)") == 2, printed
    memory = printed["absorbed_keys_one_head_at_a_time"]
    assert "提示" not in memory and "峰值内存小于一个头的键（4096 × 128 个 float64，4 MiB）：未通过" in memory


# --------------------------------------------------------------------------- errata of the review (issue 35)

@pytest.mark.cjk_font
def test_a_prefill_costs_more_absorbed_because_of_the_scoring_not_the_projections(chapter):
    """With as many queries as keys the two projection terms are equal; the whole excess is the scoring and the
    weighted sum in the latent width, (2·512 + 64) / (2·128 + 64) = 3.4 per pair, diluted to 3.2 in total."""
    g, n, h, d_head, d_rope, d_latent = chapter["glued"], 4096, 128, 128, 64, 512
    proj_naive = 4 * n * h * d_latent * d_head  # every cached token's K_C and V_C, once
    proj_absorbed = n * 4 * h * d_head * d_latent  # every query times W_UK^T and W_UV
    pairs_naive = n * (2 * h * n * (d_head + d_rope) + 2 * h * n * d_head)
    pairs_absorbed = n * (2 * h * n * (d_latent + d_rope) + 2 * h * n * d_latent)
    assert proj_naive == proj_absorbed
    assert pairs_absorbed / pairs_naive == pytest.approx(3.4) == g["ch17_per_token_cost"]
    total = (proj_absorbed + pairs_absorbed) / (proj_naive + pairs_naive)
    assert g["ch17_prefill_ratio"] == pytest.approx(total) and 3.1 < total < 3.4
    decoding = section(prose(CHAPTER), "一步解码：吸收省了什么，花了什么")
    assert "两边的投影一样多" in decoding and "差别全在打分和加权和" in decoding
    assert "重建只做一次，吸收却要每个查询各乘一次" not in decoding  # the wrong cause of the first edition
    assert "一层" in decoding and "乘以层数" in decoding  # the FLOPs are per layer, and said so
    why = questions(ASSIGNMENT)[2]["options"][3]["why"]
    assert "两边的投影也一样多" in why and f"{g['ch17_per_token_cost']:.1f} 倍" in why
    assert f"{total:.1f} 倍" in why


def test_the_rotation_is_chapter_15_s_matrix_written_on_the_right_of_a_row():
    """apply_rope rotates a row x as x R_p^T (R_p of chapter 15, acting on columns); then the score of a query
    at t and a key at s has R_t^T R_s = R_{s-t} between them, which depends on the key's position."""
    d, base = 8, 10000.0

    def rotation(p):  # chapter 15: blocks [[cos, -sin], [sin, cos]] on the pairs (2i, 2i+1)
        r = np.zeros((d, d))
        for i in range(d // 2):
            a = p * base ** (-2 * i / d)
            r[2 * i:2 * i + 2, 2 * i:2 * i + 2] = [[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]]
        return r

    rng = np.random.default_rng(11)
    q, k = rng.normal(size=(2, 1, d))
    t, s = 5, 9
    np.testing.assert_allclose(anp.apply_rope(q, np.array([t])), q @ rotation(t).T, atol=1e-12)
    score = anp.apply_rope(q, np.array([t])) @ anp.apply_rope(k, np.array([s])).T
    np.testing.assert_allclose(score, q @ rotation(t).T @ rotation(s) @ k.T, atol=1e-12)
    np.testing.assert_allclose(rotation(t).T @ rotation(s), rotation(s - t), atol=1e-12)
    rope = section(CHAPTER.read_text(encoding="utf-8"), "为什么 RoPE 吸收不了")  # with its display math
    assert "行向量" in rope and "R_t^{\\top} R_s = R_{s-t}" in rope


def test_a_head_owns_d_rope_wide_columns_of_w_qr():
    """Head i's rotated query comes from columns i·d_rope … of w_qr (the explicit reference slices so and agrees
    with attnlib); slicing d_head-wide blocks, as for w_uq, is another model."""
    w = _weights(12, d_head=4, d_rope=2)
    x = np.random.default_rng(13).normal(size=(6, 12))
    np.testing.assert_allclose(anp.multi_head_latent_attention(x, w, 3), _explicit(x, w, 3), rtol=1e-12, atol=1e-12)
    head1_rope = anp.apply_rope((x @ w["w_dq"]) @ w["w_qr"][:, 2:4])  # head 1: columns 2, 3 (d_rope = 2)
    wrong = anp.apply_rope((x @ w["w_dq"]) @ w["w_qr"][:, 4:6])  # columns 4, 5: where a d_head-wide block starts
    assert np.abs(head1_rope - wrong).max() > 1e-2
    formula = section(prose(CHAPTER), "缓存一个潜在向量")
    assert "$W_{QR}$ 每个头的一段只有 $d_{\\text{rope}}$ 宽" in formula
    from attnlib.numpy import mla

    assert "columns\n``i·d_rope ... (i+1)·d_rope - 1`` of ``w_qr``" in mla.__doc__


def test_the_timed_shapes_say_which_ratios_they_keep():
    """"形状按比例缩小" was not exact (DeepSeek-V2 has h = d_head = 128; the timed shapes have h = 16, d_head = 64): the
    page names the ratios kept (d_latent and d_rope to d_head) and says the head count is not one of them."""
    measured = section(prose(CHAPTER), "一步解码：吸收省了什么，花了什么")
    assert "按比例缩小" not in measured
    assert "之比仍是 DeepSeek-V2 的 4 和 1/2" in measured and "不再等于 $d_{\\text{head}}$" in measured
    assert "assert (tdl / tdh, tdr / tdh) == (ds[3] / ds[1], ds[2] / ds[1])" in _source()
    h, d_head, d_rope, d_latent = 128, 128, 64, 512  # DeepSeek-V2
    assert (d_latent / d_head, d_rope / d_head) == (256 / 64, 32 / 64) == (4, 0.5) and h == d_head
