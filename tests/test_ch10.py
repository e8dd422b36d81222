"""Chapter 10 (复杂度与优化): the lesson's claims hold, its self-check is right, its assignment grades as intended.

Timings are held only where the gap is large (a fitted slope of about 1 against about 2; a ratio of several
times), never against one machine's numbers; memory is measured with tracemalloc, whose counts do not depend
on the machine's load.
"""

from __future__ import annotations

import inspect
import math
import re
import warnings

import assignments
import numpy as np
import pytest
import torch
import yaml
from chapters import BY_NAME, lesson_fixture, questions
from lessons import ROOT, code_cells, prose, section
from torch.utils.flop_counter import FlopCounterMode

from attnlib import numpy as anp
from attnlib import torch as att
from attnlib.numpy import flash, sparse
from attnlib.numpy.linear import elu_feature_map
from conftest import peak_bytes

ASSIGNMENT = "ch10-efficiency"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py



# --------------------------------------------------------------------------- the page

def test_page_has_the_planned_shape_and_length():
    body = prose(CHAPTER)
    assert body.index("{doc}`ch09-multihead`") < 100  # opens where chapter 9 ended
    # the claims corrected are quoted as common statements, then measured
    sparse_part = section(body, "稀疏注意力：窗口加全局词元")
    assert "一种常见的说法是" in sparse_part and "$O(n)$" in sparse_part and "$O(n(w+g))$" in sparse_part
    assert "一点点全面性" in sparse_part
    assert "另一个函数" in section(body, "线性注意力：换掉 softmax")


def test_chapter_11_is_linked_once_it_is_in_the_book_and_named_otherwise():
    """The summary leads into chapter 11; a {doc} link to a page missing from _toc.yml breaks the -W build."""
    text = CHAPTER.read_text(encoding="utf-8")
    ending = prose(CHAPTER)[prose(CHAPTER).index("## 小结"):prose(CHAPTER).index("## 练习")]
    assert "KV 缓存" in ending
    if "file: book/ch11-kv-cache" in (ROOT / "_toc.yml").read_text(encoding="utf-8"):
        assert "{doc}`ch11-kv-cache`" in ending
    else:
        assert "第 11 章「KV 缓存与自回归生成」" in ending and "{doc}`ch11" not in text


def test_the_toc_lists_this_chapter_first_in_part_three():
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    captions = [p["caption"] for p in toc["parts"]]
    assert captions.index("第三部分 效率与推理") == captions.index("第二部分 完整的注意力") + 1
    part = next(p for p in toc["parts"] if p["caption"] == "第三部分 效率与推理")
    assert part["chapters"][0] == {"file": "book/ch10-efficiency", "title": "10. 复杂度与优化"}


def test_the_neighbours_link_this_chapter():
    ch09 = (ROOT / "book" / "ch09-multihead.md").read_text(encoding="utf-8")
    assert "{doc}`ch10-efficiency`" in section(ch09, "小结")
    intro = (ROOT / "book" / "intro.md").read_text(encoding="utf-8")
    roadmap = next(line for line in intro.splitlines() if line.startswith("- **第三部分"))
    assert "{doc}`ch10-efficiency`" in roadmap


def test_no_gpu_figure_is_claimed():
    """Nothing is measured on a GPU: the sentences about GPUs state no number and glue none."""
    body = prose(CHAPTER)
    assert "本书没有在 GPU 上测量" in section(body, "分块注意力：FlashAttention 的做法")
    for sentence in re.split(r"[。；]", body):
        if "GPU" in sentence or "显存" in sentence:
            assert "{glue" not in sentence and not re.search(r"\d+(\.\d+)?\s*(倍|毫秒|秒)", sentence), sentence


# --------------------------------------------------------------------------- the cost of the square

@pytest.mark.cjk_font
def test_exact_attention_grows_as_n_squared(chapter):
    sizes, in_matrices = chapter["sizes"], chapter["in_matrices"]
    assert list(sizes) == [256, 512, 1024, 2048] and chapter["d"] == 64
    # the fitted slopes: ~2 (2.1-2.4 seen for the time); far from the ~1 of the window below
    assert chapter["time_slope"] > 1.6
    assert 1.8 < chapter["memory_slope"] < 2.1
    # "内存几乎全花在那一个 n×n 的权重数组上": between 1 and 1.3 matrices, tending to 1
    assert 1.0 < in_matrices.min() and in_matrices.max() < 1.3 and in_matrices[-1] < 1.05
    assert 32 < chapter["glued"]["ch10_peak_2048"] < 34  # MiB; 2048² float64 = 32 MiB


def test_thirty_two_k_tokens_in_float16():
    assert 32768**2 * 2 == 2 * 2**30  # 2 GiB per head per layer
    assert 32 * 32768**2 * 2 == 64 * 2**30


@pytest.mark.cjk_font
def test_the_long_sequence_numbers(chapter):
    assert chapter["glued"]["ch10_long_gib"] == 2.0 and chapter["glued"]["ch10_long_32_heads"] == 64.0


@pytest.mark.cjk_font
def test_the_figures_draw_without_warnings_and_are_labelled_in_chinese(chapter):
    names = ("cost_fig", "mask_fig", "time_fig", "sharp_fig", "memory_fig")
    assert sum("plt.show()" in cell for cell in code_cells(CHAPTER)) == len(names)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for name in names:
            chapter[name].canvas.draw()
    assert not caught, [str(w.message) for w in caught]
    cost, memory = chapter["cost_fig"], chapter["memory_fig"]
    assert "本机测得" in cost.get_suptitle() and "本机" in memory.get_suptitle()
    for ax in cost.axes[:2] + chapter["time_fig"].axes[:1] + memory.axes[:1]:
        assert ax.get_xscale() == ax.get_yscale() == "log" and ax.get_xlabel() == "序列长度 n"
    legend = [t.get_text() for t in cost.axes[0].get_legend().get_texts()]
    assert any("n^2" in t and "斜率 2" in t for t in legend)  # the n² slope is marked
    assert "一个 CPU 线程" in cost.axes[0].get_ylabel() and "峰值内存" in cost.axes[1].get_ylabel()
    times = [t.get_text() for t in chapter["time_fig"].axes[0].get_legend().get_texts()]
    assert [t.split("，")[0] for t in times] == ["精确注意力", "滑动窗口（w = 64", "线性注意力"]
    assert {ax.get_title().split("：")[0] for ax in chapter["mask_fig"].axes} == {"双向", "因果"}
    assert "每块的键数" in memory.axes[1].get_xlabel()
    assert chapter["sharp_fig"].axes[0].get_xscale() == "log"


# --------------------------------------------------------------------------- sliding window

def test_window_score_count_is_bounded_by_n_times_window_plus_globals():
    """The prose: at most n(2w - 1 + 2g) scores; a window covering the sequence is n²."""
    for n, w, glob in ((50, 3, (0,)), (64, 8, (0, 1, 2)), (100, 1, ()), (37, 5, (0, 20))):
        for causal in (False, True):
            allowed = anp.sliding_window_mask(n, w, causal=causal, global_tokens=glob).sum()
            assert allowed <= n * (2 * w - 1 + 2 * len(glob))
            row = anp.sliding_window_mask(n, w, causal=causal, global_tokens=glob)[n // 2]
            if n // 2 not in glob:
                assert row.sum() <= 2 * w - 1 + len(glob)  # an ordinary query
    assert anp.sliding_window_mask(30, 30).all()  # w >= n: back to n²


@pytest.mark.cjk_font
def test_the_mask_figure(chapter):
    kinds = chapter["kind"]  # the causal panel, drawn last
    assert kinds.shape == (24, 24)
    assert (kinds[0, 1:] == 0).all()  # causal: the global query 0 sees only itself
    assert (kinds[5:, 0] == 2).all()  # ...and is seen by every later query, outside their windows
    assert (kinds[np.triu_indices(24, 1)] == 0).all()


def test_the_library_window_equals_masked_attention_and_never_forms_n_by_n():
    rng = np.random.default_rng(100)
    n = 300
    q, k, v = rng.normal(size=(3, n, 64))
    for causal in (False, True):
        mask = anp.sliding_window_mask(n, 16, causal=causal, global_tokens=(0, 150))
        dense, _ = anp.scaled_dot_product_attention(q, k, v, mask=mask)
        local = anp.sliding_window_attention(q, k, v, 16, global_tokens=(0, 150), causal=causal)
        assert np.abs(local - dense).max() < 1e-12
    assert sparse.chunk_size(64) == 32  # "把查询切成每段 w/2 个"
    n = 8192
    q, k, v = rng.normal(size=(3, n, 16))
    peak = peak_bytes(lambda: anp.sliding_window_attention(q, k, v, 16, global_tokens=(0, 1)))
    assert peak < n * n  # not even one n x n boolean array


@pytest.mark.cjk_font
def test_window_and_linear_times_grow_linearly(chapter):
    assert list(chapter["long_sizes"]) == [1024, 2048, 4096, 8192]
    # fitted slopes ~1 (1.0-1.2 seen on a quiet machine, up to 1.74 on a busy one) against exact attention's ~2:
    # the page picks its words by the slope it measured
    assert chapter["window_slope"] < chapter["time_slope"] - 0.3
    assert chapter["linear_slope"] < chapter["time_slope"] - 0.3
    words = chapter["glued"]["ch10_window_slope_words"]
    assert ("约为 1" in words) == (chapter["window_slope"] < 1.35)
    assert chapter["glued"]["ch10_window_vs_exact"] < 0.7  # 0.29 seen at n = 2048 (w = 64)


@pytest.mark.cjk_font
def test_what_the_window_gives_up_depends_on_where_attention_goes(chapter):
    kept, error, size = chapter["kept"], chapter["error"], chapter["size"]
    share = chapter["glued"]["ch10_mask_share"]
    assert abs(kept["随机的查询和键"] - share) < 0.05  # random scores: the window keeps about its share
    assert error["随机的查询和键"] > size["随机的查询和键"]  # "比完整输出本身还大"
    assert kept["按位置远近打分"] > 0.9 and error["按位置远近打分"] < 0.05
    assert error["按位置远近打分"] < error["随机的查询和键"] / 5
    positional, w = chapter["positional"], chapter["w"]
    s = positional @ positional.T
    assert np.allclose(s[5:, 5:], s[:-5, :-5])  # a function of the distance only
    assert (s.argmax(axis=1) == np.arange(len(s))).all()  # highest at distance 0
    offsets = np.abs(np.subtract.outer(np.arange(len(s)), np.arange(len(s))))
    assert s[offsets < w].mean() > s[offsets >= w].mean() + 20  # "离得越远大体越低"


# --------------------------------------------------------------------------- linear attention

@pytest.mark.cjk_font
def test_the_two_orders_agree(chapter):
    assert np.allclose(chapter["by_square"], chapter["by_sums"])
    assert chapter["square"].shape == (6, 6) and chapter["kv"].shape == (64, 64)


def test_linear_attention_does_not_scale_by_sqrt_d():
    """The prose: anp.linear_attention does not divide by √d_k."""
    rng = np.random.default_rng(101)
    q, k, v = rng.normal(size=(3, 5, 4))
    f_q, f_k = elu_feature_map(q), elu_feature_map(k)
    assert np.allclose(anp.linear_attention(q, k, v), f_q @ (f_k.T @ v) / (f_q @ f_k.sum(0))[:, None])
    assert np.allclose(elu_feature_map(np.array([-1.0, 0.0, 2.0])), [np.exp(-1), 1.0, 3.0])


@pytest.mark.cjk_font
def test_linear_attention_cannot_be_as_sharp(chapter):
    g = chapter["glued"]
    assert g["ch10_soft_sharp_first"] < 2 * g["ch10_uniform"]  # flat rows at c = 0.25
    assert g["ch10_gap_first"] < 0.1
    assert g["ch10_soft_sharp_last"] > 0.8  # "几乎只看一个键"
    assert g["ch10_lin_sharp_last"] < 0.05 and g["ch10_lin_sharp_last"] < 1.5 * g["ch10_lin_sharp_first"]
    assert g["ch10_gap_last"] > 0.5
    assert (np.diff(chapter["sharp"]["softmax 注意力"]) > 0).all()


def test_the_weight_ratio_of_linear_attention_tends_to_a_limit():
    """For large c, phi(c q) ~ c q+: the ratio of two keys' weights no longer depends on c; softmax's explodes."""
    rng = np.random.default_rng(102)
    q, k = rng.normal(size=16), rng.normal(size=(2, 16))

    def lin_ratio(c):
        w = elu_feature_map(k) @ elu_feature_map(c * q)
        return w[0] / w[1]

    assert abs(lin_ratio(1e3) / lin_ratio(1e4) - 1) < 1e-3
    soft = [np.exp(c * (k[0] - k[1]) @ q) for c in (1.0, 4.0)]
    assert max(soft) / min(soft) > 10


@pytest.mark.cjk_font
def test_causal_linear_attention_sees_no_future(chapter):
    assert np.array_equal(chapter["changed"][:8], chapter["causal_out"][:8])
    assert not np.allclose(chapter["changed"][8:], chapter["causal_out"][8:])
    assert np.allclose(chapter["by_mask"], chapter["causal_out"])


# --------------------------------------------------------------------------- online softmax and tiles

@pytest.mark.cjk_font
def test_the_online_softmax_table(chapter):
    table, stream = chapter["table"], chapter["stream"]
    maxima = [row[2] for row in table]
    assert maxima == [max(stream[:t]) for t in range(1, len(stream) + 1)]
    for (t, _, m, rescale, total), before in zip(table, [-math.inf] + maxima[:-1], strict=True):
        assert math.isclose(rescale, math.exp(before - m))
        assert math.isclose(total, sum(math.exp(s - m) for s in stream[:t]))
    assert chapter["grew"] == 2  # 2 -> 5 -> 9
    assert np.allclose(chapter["online"], anp.softmax(np.array(stream)))
    assert not math.isclose(chapter["no_rescale"], chapter["total"])


def test_the_reading_of_attend_block_quotes_its_code():
    """Every code fragment the bullet list quotes is in attend_block (or the function that calls it)."""
    source = inspect.getsource(flash.attend_block)
    reading = prose(CHAPTER).split("逐段来读", 1)[1].split("用 float64 检查", 1)[0]
    reading = re.sub(r"\{[\w:-]+\}`[^`]*`", "", reading)  # roles ({term} links) are not code
    fragments = [f for f in re.findall(r"`([^`]+)`", reading) if f != "nan"]  # nan: a value, not code
    assert len(fragments) >= 12
    caller = inspect.getsource(flash.tiled_attention) + inspect.getsource(flash)
    for fragment in fragments:
        assert fragment in source or fragment in caller, fragment
    assert "q = q * (1.0 / math.sqrt(q.shape[-1]))" in inspect.getsource(flash.tiled_attention)


def test_the_bound_shortcut_and_the_rescale_path_are_both_exercised():
    """The lesson's scale 1 skips the maximum (every score provably small); scale 30 takes the rescaling path."""
    rng = np.random.default_rng(10)
    q, k = rng.normal(size=(2, 100, 64))
    q = q * (1.0 / 8.0)
    assert flash.rows_with_small_scores(q, k, False).all()
    assert not flash.rows_with_small_scores(30.0 * q, k, False).any()


@pytest.mark.cjk_font
def test_tiles_equal_exact_attention(chapter):
    assert chapter["checked"] == 50 and chapter["worst"] < 1e-10
    assert not chapter["masked_row"].any()
    assert not chapter["mask"][5].any()


@pytest.mark.cjk_font
def test_tiles_need_memory_linear_in_n_and_block(chapter):
    assert 0.6 < chapter["flash_slope"] < 1.2  # linear in n (0.91 seen), not 2
    assert chapter["glued"]["ch10_flash_saving"] > 10
    assert 1.5 < chapter["per_block"] < 2.5  # about two n x c blocks per key
    # same order of magnitude as exact attention in NumPy: no speed-up measured, none claimed
    assert 0.3 < chapter["glued"]["ch10_flash_time_ratio"] < 3


def test_two_blocks_live_at_once_only_when_there_are_two():
    """The prose: about two blocks because a new block of scores exists before the last one is freed."""
    rng = np.random.default_rng(103)
    n, d = 1024, 16
    q, k, v = rng.normal(size=(3, n, d))
    one = peak_bytes(lambda: anp.flash_attention(q, k, v, block_size=(n, n)))  # a single key block
    two = peak_bytes(lambda: anp.flash_attention(q, k, v, block_size=(n, n // 2)))
    block = n * n * 8
    assert one < 1.3 * block and two > 0.9 * block  # two halves alive together ~ one whole


def test_tiles_do_the_same_multiply_adds():
    rng = np.random.default_rng(104)
    q, k, v = (torch.as_tensor(a) for a in rng.normal(size=(3, 64, 16)))
    counts = []
    for f in (lambda: att.flash_attention(q, k, v, block_size=16), lambda: att.scaled_dot_product_attention(q, k, v)):
        with FlopCounterMode(display=False) as counter:
            f()
        counts.append(counter.get_total_flops())
    assert counts[0] == counts[1] == 2 * 64 * 64 * (16 + 16)


@pytest.mark.cjk_font
def test_torch_twin_and_its_gradients(chapter):
    assert max(chapter["gaps"].values()) < 1e-12
    assert chapter["q_t"].grad is None  # autograd.grad, not backward: nothing left on the leaves


# --------------------------------------------------------------------------- the pitfalls

def test_pitfall_window_off_by_one_sees_two_more_keys():
    n, w = 40, 5
    less = anp.sliding_window_mask(n, w)
    offset = np.abs(np.subtract.outer(np.arange(n), np.arange(n)))
    assert ((offset <= w).sum(axis=1) - less.sum(axis=1))[w:-w].tolist() == [2] * (n - 2 * w)


def test_pitfall_a_global_key_counted_twice_weighs_more():
    rng = np.random.default_rng(105)
    n, w, g = 20, 4, 10
    q, k, v = rng.normal(size=(3, n, 8))
    scores = anp.attention_scores(q, k)[g + 1]  # query 11 has the global key 10 in its window
    once = anp.softmax(scores, mask=anp.sliding_window_mask(n, w, global_tokens=(g,))[g + 1])
    doubled = np.exp(scores - scores.max()) * anp.sliding_window_mask(n, w, global_tokens=(g,))[g + 1]
    doubled[g] *= 2
    doubled /= doubled.sum()
    assert doubled[g] > once[g]


def test_pitfall_linear_attention_without_the_normaliser_is_no_average():
    rng = np.random.default_rng(106)
    q, k = rng.normal(size=(2, 6, 4))
    same = np.ones((6, 4))
    f_q, f_k = elu_feature_map(q), elu_feature_map(k)
    assert np.allclose(anp.linear_attention(q, k, same), same)
    assert not np.allclose(f_q @ (f_k.T @ same), same)


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_memory_of_one_head():
    n = 32768
    sizes = {"64 KiB": n * 2, "2 GiB": n * n * 2, "4 GiB": n * n * 4, "1 GiB": n * n}
    assert sizes == {"64 KiB": 64 * 2**10, "2 GiB": 2 * 2**30, "4 GiB": 4 * 2**30, "1 GiB": 2**30}
    assert [o["text"] for o in questions(ASSIGNMENT)[0]["options"]] == list(sizes)


def test_selfcheck_window_count_grows_linearly():
    w, glob = 4, (0, 1)
    counts = [anp.sliding_window_mask(n, w, global_tokens=glob).sum() for n in (100, 200, 400)]
    assert counts[2] - counts[1] == 2 * (counts[1] - counts[0])  # linear in n (C), not n² (A)
    assert all(c <= n * (2 * w - 1 + 2 * len(glob)) for c, n in zip(counts, (100, 200, 400), strict=True))


def test_selfcheck_linear_attention_statements():
    rng = np.random.default_rng(107)
    q, k, v = rng.normal(size=(3, 8, 4))
    f_q, f_k = elu_feature_map(q), elu_feature_map(k)
    square = f_q @ f_k.T
    assert np.allclose(square @ v / square.sum(1, keepdims=True), anp.linear_attention(q, k, v))  # A
    assert not np.allclose(anp.linear_attention(q, k, v), anp.scaled_dot_product_attention(q, k, v)[0])  # B
    lin = elu_feature_map(50 * q) @ f_k.T
    assert (lin / lin.sum(1, keepdims=True)).max() < 0.5  # C: no sharper with a large query
    later = v.copy()
    later[5:] += 1
    assert np.array_equal(anp.linear_attention(q, k, later, causal=True)[:5],
                          anp.linear_attention(q, k, v, causal=True)[:5])  # D


def test_selfcheck_tiles_statements():
    rng = np.random.default_rng(108)
    q, k, v = rng.normal(size=(3, 29, 8))
    exact, _ = anp.scaled_dot_product_attention(q, k, v)
    for block in (7, 13, (13, 29)):  # A and C are wrong: exact for any block, dividing n or not
        assert np.abs(anp.flash_attention(q, k, v, block_size=block) - exact).max() < 1e-12
    d_option = questions(ASSIGNMENT)[3]["options"][3]
    assert d_option.get("correct") and "显存" in d_option["text"]


# --------------------------------------------------------------------------- the assignment

NOISY_ONLINE = '''
import sys
import warnings


def stream_max_and_sum(scores):
    print("调试：开始", file=sys.stderr)
    warnings.warn("这是学生代码里的一个警告")
    m, total = -math.inf, 0.0
    for x in scores:
        if x == -math.inf:
            continue
        m_new = max(m, float(x))
        total = total * math.exp(m - m_new) + math.exp(x - m_new)
        m = m_new
    return m, total


def online_softmax(scores):
    x = np.array(list(scores), dtype=float)
    np.log(np.zeros(1))  # a RuntimeWarning from NumPy
    m, total = stream_max_and_sum(x)
    return np.zeros_like(x) if total == 0 else np.exp(x - m) / total
'''

LOOP_WINDOW = '''
def sliding_window_attention(q, k, v, window, global_tokens=(), causal=False):
    q, k, v = (np.asarray(a, dtype=float) for a in (q, k, v))
    n = len(q)
    glob = sorted(set(global_tokens))
    out = np.zeros((n, v.shape[1]))
    for i in range(n):
        if i in glob:
            keys = list(range(i + 1)) if causal else list(range(n))
        else:
            hi = i + 1 if causal else min(n, i + window)
            near = range(max(0, i - window + 1), hi)
            keys = sorted(set(near) | {g for g in glob if not causal or g <= i})
        s = k[keys] @ q[i] / np.sqrt(q.shape[1])
        w = np.exp(s - s.max())
        out[i] = w @ v[keys] / w.sum()
    return out
'''

LOOP_LINEAR = '''
def phi(x):
    return np.where(x > 0, x + 1.0, np.exp(np.minimum(x, 0.0)))


def linear_attention(q, k, v, causal=False):
    fq, fk, v = phi(np.asarray(q, float)), phi(np.asarray(k, float)), np.asarray(v, float)
    if not causal:
        return fq @ (fk.T @ v) / (fq @ fk.sum(axis=0))[:, None]
    s, z = np.zeros((fk.shape[1], v.shape[1])), np.zeros(fk.shape[1])
    out = np.zeros((len(fq), v.shape[1]))
    for i in range(len(fq)):
        s += np.outer(fk[i], v[i])
        z += fk[i]
        out[i] = fq[i] @ s / (fq[i] @ z)
    return out


def linear_error(q, k, v):
    exact = anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean((linear_attention(q, k, v) - exact) ** 2) / np.mean(np.asarray(v) ** 2)))
'''

DELEGATING = {
    "sliding_window_attention": '''
def sliding_window_attention(q, k, v, window, global_tokens=(), causal=False):
    return anp.sliding_window_attention(q, k, v, window, global_tokens=global_tokens, causal=causal)
''',
    "linear_attention": '''
def linear_attention(q, k, v, causal=False):
    return anp.linear_attention(q, k, v, causal=causal)


def linear_error(q, k, v):
    diff = linear_attention(q, k, v) - anp.scaled_dot_product_attention(q, k, v)[0]
    return float(np.sqrt(np.mean(diff**2) / np.mean(np.asarray(v) ** 2)))
''',
    "online_softmax": '''
def stream_max_and_sum(scores):
    x = np.array(list(scores), dtype=float)
    m = float(x.max(initial=-np.inf))
    weights = anp.softmax(x)  # the largest weight is exp(0) / l
    return m, (1.0 / float(weights.max()) if m > -math.inf else 0.0)


def online_softmax(scores):
    return anp.softmax(np.array(list(scores), dtype=float))
''',
    "tiled_attention": '''
def tiled_attention(q, k, v, block_size, causal=False):
    return anp.flash_attention(q, k, v, causal=causal, block_size=(len(q), block_size))
''',
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "window_off_by_one", "linear_without_normaliser",
                                    "online_without_rescale", "tiles_forget_accumulator_rescale")
    memory = assignments.wrong_cells(ASSIGNMENT, "window_by_dense_mask", "tiles_keep_every_block")
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        "delegating": assignments.with_cells(source, DELEGATING),  # attnlib does the work: 0 everywhere
        "mixed": assignments.with_cells(source, mixed),
        # right values in O(n²) memory: only the memory checks fail, and they are essential
        "memory": assignments.with_cells(source, memory),
        "noisy": assignments.with_cells(source, {"online_softmax": NOISY_ONLINE}),
        "loops": assignments.with_cells(source, {"sliding_window_attention": LOOP_WINDOW,
                                                 "linear_attention": LOOP_LINEAR}),
    }, {
        "delegating": [0, 0, 0, 0],
        # a failed essential check (【要点】) caps a cell at a third of its points. The off-by-one window keeps
        # only w = n and the two memory checks (3 of 14); the unnormalised linear attention only its no-leak,
        # error-ratio and four memory checks (6 of 18, = the cap); without rescaling, the stream passes the
        # memory, all -inf and empty checks (5 of 15, capped at 2/3); tiles without the rescale of the values pass
        # block sizes 29 and 40 >= n_k (one block) and the two memory checks (4 of 15)
        "mixed": [3 * 3 / 14, 2 * 6 / 18, 2 / 3, 3 * 4 / 15],
        "memory": [1, 2, 2, 1],
        "noisy": [3, 2, 2, 3],
        "loops": [3, 2, 2, 3],
    })  # 10 autograded + the written answer (2, by hand)


def test_the_model_answer_gives_the_share_an_ordinary_query_keeps():
    """Exercise 5's model answer: with random queries and keys an ordinary query keeps about (2w - 1 + g)/n.

    (2w - 1 + 2g)/n, once written there, is about the mean over every row, global queries included (they keep 1).
    """
    from nbrun import grade_id, source_notebook

    answer = next(c.source for c in source_notebook(ASSIGNMENT).cells if grade_id(c) == "written_efficiency")
    assert "普通查询只留下约 $(2w-1+g)/n$ 的权重" in answer and "2w-1+2g" not in answer
    rng = np.random.default_rng(0)
    n, d, w, glob = 512, 16, 16, tuple(range(5, 512, 32))
    q, k = rng.normal(size=(2, n, d)) / 2  # small scores: weights nearly uniform, as for random queries and keys
    kept = (anp.softmax(q @ k.T / np.sqrt(d)) * anp.sliding_window_mask(n, w, global_tokens=glob)).sum(axis=1)
    ordinary = [i for i in range(w, n - w) if i not in glob]  # full windows, not global
    share = (2 * w - 1 + len(glob)) / n
    assert abs(kept[ordinary].mean() - share) < 0.05 * share
    assert abs(kept[ordinary].mean() - (2 * w - 1 + 2 * len(glob)) / n) > 0.2 * share


def _printed(name: str, *, hidden: bool) -> tuple[dict, dict]:
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
    return execute(source_notebook(ASSIGNMENT), replace=kept.cells, hidden=hidden)


def test_a_window_facing_the_future_is_caught_before_hand_in():
    """Negated offsets give the same window without causal; the visible causal case catches them, capped at a
    third, and names the window that looks ahead (it passed every visible check before)."""
    scores, out = _printed("window_offsets_negated", hidden=False)
    assert scores["test_sliding_window_attention"] == pytest.approx(1.0)
    assert "窗口朝向了未来" in out["test_sliding_window_attention"]


def test_a_causal_linear_attention_that_fails_is_not_said_to_leak():
    """A causal normaliser that does not broadcast raises; no check calls that leaking the future (the old fixed
    hint of the no-leak check said so whatever made it fail)."""
    scores, out = _printed("causal_normaliser_not_broadcast", hidden=True)
    printed = out["test_linear_attention"]
    assert scores["test_linear_attention"] == pytest.approx(2 / 3)
    assert "后面的键和值影响了前面的输出" not in printed and "调用时抛出了异常 ValueError" in printed
