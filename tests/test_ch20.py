"""Chapter 20 (推理服务中的注意力): the lesson's claims hold, the self-check is right, the assignment grades.

What its cells leave shows: a token's place is ``table[t // B]``, slot ``t % B``; reserving each request's maximum
length wastes more than paging in blocks of any of the sizes shown, and the waste grows with the block size; the pool
holds exactly the blocks counted; paged attention equals attention over the contiguous keys, timed with its sentence
picked by the ratio; forked requests share the prompt's full blocks and copy only the partial one, counted; top-k
attention equals attention masked to the selected keys, selecting before the mask picks future keys, ties go to the
lower index; the counted scores are at most 1/16 of dense; the retrieval hits rise and the error falls with k.  The
self-check's facts are checked with attnlib, and the assignment is generated, submitted and autograded by nbgrader.
"""

from __future__ import annotations

import assignments
import numpy as np
import pytest
from chapters import BY_NAME, correct, lesson_fixture, questions
from lessons import ROOT, code_cells, prose, section

from attnlib import numpy as anp
from grading import runner

ASSIGNMENT = "ch20-serving"
CHAPTER = BY_NAME[ASSIGNMENT].page
chapter = lesson_fixture(ASSIGNMENT)  # what every chapter meets: test_chapters.py


# --------------------------------------------------------------------------- the page

def test_page_opens_from_chapter_11_and_names_its_sources():
    body = prose(CHAPTER)
    opening = body[:body.index("## 块表与碎片")]
    assert "{doc}`ch11-kv-cache`" in opening and "PagedAttention" in opening and "DeepSeek-V3.2" in opening


def test_chapter_11_leads_here():
    assert "{doc}`ch20-serving`" in prose(ROOT / "book" / "ch11-kv-cache.md")


def test_the_common_statement_is_quoted_and_the_times_are_this_machine_s():
    body = prose(CHAPTER)
    assert "一种常见的错误写法是“先挑出 top-k，再加因果掩码”" in body  # a bug shown as code, not a claim
    measured = section(body, "分页注意力等于连续注意力")
    assert "本机" in measured and "不说差别的原因" in measured


@pytest.mark.cjk_font
def test_block_table_and_fragmentation(chapter):
    glued = chapter["glued"]
    table = chapter["table"]
    assert (glued["ch20_t_block"], glued["ch20_t_slot"]) == (table[9 // 4], 9 % 4)
    wastes = [glued[f"ch20_waste_{b}"] for b in (8, 16, 64, 256)]
    assert wastes == sorted(wastes) and wastes[-1] < glued["ch20_reserved_waste"]
    lengths = chapter["lengths"]
    assert glued["ch20_used_mib"] == pytest.approx(lengths.sum() * 4096 / 2**20)
    assert glued["ch20_reserved_mib"] == pytest.approx(len(lengths) * 2048 * 4096 / 2**20)


@pytest.mark.cjk_font
def test_paged_attention_equals_contiguous_and_the_sentence_fits(chapter):
    glued = chapter["glued"]
    assert glued["ch20_paged_gap"] < 1e-5
    ratio = glued["ch20_paged_ms"] / glued["ch20_contiguous_ms"]
    assert ("不到" in glued["ch20_paged_sentence"]) == (ratio < 1.3)
    assert "舍入误差" in glued["ch20_gap_sentence"] and "超出" not in glued["ch20_gap_sentence"]


@pytest.mark.cjk_font
def test_prefix_sharing_counts(chapter):
    glued = chapter["glued"]
    assert glued["ch20_full_blocks"] == 1000 // 16
    # the full blocks once, each child's copied partial block and its own, and the parent's own partial block
    assert glued["ch20_with_sharing"] == 62 + 8 * -(-(1040 - 62 * 16) // 16) + 1
    assert glued["ch20_without_sharing"] == 8 * -(-1040 // 16)


@pytest.mark.cjk_font
def test_topk_claims(chapter):
    glued = chapter["glued"]
    assert glued["ch20_future_rows"] > 128
    assert glued["ch20_score_fraction"] <= 1 / 16
    assert glued["ch20_score_fraction"] == pytest.approx(256 / 8192, rel=0.02)
    assert glued["ch20_idx_per_pair"] == pytest.approx(64 * 128 / (128 * (576 + 512)))
    assert glued["ch20_idx_ratio_8k"] < 1 < glued["ch20_idx_ratio_128k"]
    hits = [glued[f"ch20_hit_{k}"] for k in (4, 16, 64)]
    errs = [glued[f"ch20_err_{k}"] for k in (4, 16, 64)]
    assert hits == sorted(hits) and errs == sorted(errs, reverse=True)


def test_the_page_uses_the_library_not_a_copy():
    source = "\n".join(code_cells(CHAPTER))
    for name in ("anp.PagedKVCache", "anp.paged_attention", "anp.topk_sparse_attention",
                 "anp.lightning_indexer_scores"):
        assert name in source, name


# --------------------------------------------------------------------------- the self-check

def test_selfcheck_block_table():
    cache = anp.PagedKVCache(10, 16, 1, 1)
    other, seq = cache.allocate(), cache.allocate()
    values = np.arange(17.0).reshape(1, 17, 1)
    for start, stop in ((0, 16), (16, 17)):  # another sequence's block between the two
        cache.append(other, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
        cache.append(seq, values[:, start:stop], values[:, start:stop])
    table = cache.block_table(seq)
    assert cache._k[table[16 // 16], 0, 16 % 16, 0] == 16.0 and table[1] != 1
    assert correct(questions(ASSIGNMENT)[0]) == ["物理块 2 的第 0 个槽"]  # table [7, 2, 9]: table[1] = 2, slot 0


def test_selfcheck_block_count():
    cache = anp.PagedKVCache(100, 16, 1, 1)
    seq = cache.allocate()
    cache.append(seq, np.zeros((1, 1000, 1)), np.zeros((1, 1000, 1)))
    assert len(cache.block_table(seq)) == 63 and correct(questions(ASSIGNMENT)[1]) == ["63"]


def test_selfcheck_copy_on_write():
    cache = anp.PagedKVCache(10, 4, 1, 1)
    parent = cache.allocate()
    cache.append(parent, np.ones((1, 6, 1)), np.ones((1, 6, 1)))
    child = cache.fork(parent)
    cache.append(child, np.zeros((1, 1, 1)), np.zeros((1, 1, 1)))
    p, c = cache.block_table(parent), cache.block_table(child)
    assert p[0] == c[0] and p[1] != c[1]
    assert np.array_equal(cache.read(parent)[0], np.ones((1, 6, 1)))
    assert correct(questions(ASSIGNMENT)[2]) == ["只有半满的最后一块被复制，满块仍然共用", "父序列的键和值保持不变"]


def test_selfcheck_topk_masks_first():
    n, rng = 6, np.random.default_rng(0)
    q, k, v = rng.normal(size=(3, n, 4))
    index = np.tile(np.arange(n, dtype=float), (n, 1))  # the future keys score highest
    out = anp.topk_sparse_attention(q, k, v, index, 2)
    mask = np.zeros((n, n), bool)
    for i in range(n):
        mask[i, [j for j in (i, i - 1) if j >= 0]] = True
    assert np.allclose(out, anp.scaled_dot_product_attention(q, k, v, mask=mask)[0])
    assert correct(questions(ASSIGNMENT)[3])[0].startswith("先加因果掩码")


# --------------------------------------------------------------------------- the assignment

DELEGATING = {
    "blocks_needed": "def blocks_needed(lengths, block_size, prefix_len=0):\n"
                     "    pool = anp.PagedKVCache(sum(-(-n // block_size) for n in lengths) + 2, block_size, 1, 1)\n"
                     "    parent = pool.allocate()\n"
                     "    if prefix_len:\n"
                     "        pool.append(parent, np.zeros((1, prefix_len, 1)), np.zeros((1, prefix_len, 1)))\n"
                     "    for n in lengths:\n"
                     "        if n <= prefix_len:\n"
                     "            raise ValueError('too short')\n"
                     "        child = pool.fork(parent)\n"
                     "        pool.append(child, np.zeros((1, n - prefix_len, 1)), np.zeros((1, n - prefix_len, 1)))\n"
                     "    pool.free(parent)\n"
                     "    return pool.n_blocks - pool.free_blocks\n",
    "topk_mask": "def topk_mask(scores, k):\n"
                 "    from attnlib.numpy import sparse\n"
                 "    n = len(scores)\n"
                 "    chosen, valid = sparse.select_top_k(np.asarray(scores, float), k, slice(0, n), n, True)\n"
                 "    out = np.zeros((n, n), dtype=bool)\n"
                 "    np.put_along_axis(out, chosen, valid, axis=1)\n"
                 "    return out\n",
    "topk_attention": "def topk_attention(q, k, v, scores, top_k):\n"
                      "    return anp.topk_sparse_attention(q, k, v, scores, top_k)\n",
    "block_pool": "class BlockPool:\n"
                  "    def __init__(self, n_blocks, block_size):\n"
                  "        self.pool = anp.PagedKVCache(n_blocks, block_size, 1, 1)\n"
                  "    def allocate(self):\n"
                  "        return self.pool.allocate()\n"
                  "    def fork(self, seq):\n"
                  "        return self.pool.fork(seq)\n"
                  "    def append(self, seq, values):\n"
                  "        x = np.asarray(values, dtype=float).reshape(1, -1, 1)\n"
                  "        self.pool.append(seq, x, x)\n"
                  "    def free(self, seq):\n"
                  "        self.pool.free(seq)\n"
                  "    def read(self, seq):\n"
                  "        return list(self.pool.read(seq)[0][0, :, 0]) if self.pool.length(seq) else []\n"
                  "    def n_free(self):\n"
                  "        return self.pool.free_blocks\n",
}


@pytest.mark.grading
@pytest.mark.slow
def test_assignment_grades_as_intended(tmp_path):
    mixed = assignments.wrong_cells(ASSIGNMENT, "slot_off_by_one", "blocks_share_partial", "topk_before_mask",
                                    "zeroed_after_softmax", "fork_copies_nothing")
    delegating = "anp = __import__('attnlib.numpy', fromlist=['x'])\n"
    assignments.grade(tmp_path, ASSIGNMENT, lambda source, blank: {
        # attnlib's paged cache and top-k selection behind the student's names score 0
        "delegating": assignments.with_cells(source, {name: delegating + cell for name, cell in DELEGATING.items()}),
        "mixed": assignments.with_cells(source, mixed),
        # right, but every call prints to stderr, warns and writes to fd 2: nbgrader zeroes a test cell with any
        # stderr, so the test cells run the student's code only through checks.call
        "noisy": runner.sheet(source, "noisy"),
    }, {
        "delegating": [2, 0, 0, 0, 0],
        # each misses its exercise's point, so a failed essential check caps its cell at a third (the top-k
        # attention also runs on the wrong top-k selection: 1 of its 5 checks passes; the pool that writes into a
        # shared block passes 3 of its 10 checks)
        "mixed": [2 / 3, 1, 1 / 2, 2 / 5, 9 / 10],
        "noisy": [2, 3, 3, 2, 3],
    })  # 13 autograded + the written answer (2, by hand)


def test_the_written_answer_follows_the_lesson():
    from nbrun import grade_id, source_notebook

    cells = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}
    answer = cells["written_serving"]
    assert "86" in answer and "520" in answer
    assert 62 + 8 * 3 == 86 and 8 * -(-1040 // 16) == 520
    # the chapter keeps the prefix sequence (87 blocks, its own partial block included), the exercise frees it (86):
    # both the exercise and the model answer say which they count
    assert 62 + 8 * 3 + 1 == 87
    for text in (cells["ex2_text"], answer):
        assert "87" in text and "释放" in text


# --------------------------------------------------------------------------- errata of the review (issue 35)

@pytest.mark.cjk_font
def test_the_fragmentation_is_per_layer_and_the_block_size_trades_three_things(chapter):
    body = prose(CHAPTER)
    table = section(body, "块表与碎片")
    assert "在一层里实际用到 {glue:text}`ch20_used_mib:.1f` MiB" in table and "（也是一层的）" in table
    assert "整个模型再乘以层数" in table
    assert "块表越长" in table and "只有满块能共用" in table and "并行度" in table
    assert "本书没有在 GPU 上测" in table  # the parallelism is the paper's measurement, not ours
    paged, sizes = chapter["paged_mib"], chapter["sizes"]
    assert list(sizes) == [2**i for i in range(10)] and paged == sorted(paged)
    assert paged[0] == pytest.approx(chapter["used"] / 2**20) and paged[-1] < chapter["reserved"] / 2**20
    fig = chapter["waste_fig"]
    from lessons import assert_draws_without_warnings

    assert_draws_without_warnings(fig)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == [
        "分页", "连续：每个请求预留 2048 个词元", "实际用到"]


@pytest.mark.cjk_font
def test_the_parent_s_partial_block_is_the_difference_from_the_exercise(chapter):
    """The page's pool keeps the parent (87 blocks); freed, only its partial block goes (86, the exercise's
    blocks_needed example)."""
    glued = chapter["glued"]
    assert (glued["ch20_with_sharing"], glued["ch20_after_free"]) == (87, 86)
    assert glued["ch20_after_free"] == 62 + 8 * 3  # the written answer's and blocks_needed's count
    from nbrun import grade_id, source_notebook

    exercise = {grade_id(c): c.source for c in source_notebook(ASSIGNMENT).cells}["ex2_text"]
    assert "86" in exercise  # its example: the prefix freed
    sharing = section(prose(CHAPTER), "前缀共享与写时复制")
    assert "`blocks_needed` 按后一种情形算" in sharing


@pytest.mark.cjk_font
def test_the_fork_figure_and_the_grain_of_sharing(chapter):
    tables, kinds = chapter["tables"], chapter["kinds"]
    assert [len(t) for t in tables] == [3, 4, 4] and tables[1][:2] == tables[2][:2] == tables[0][:2]
    assert len({tables[0][2], tables[1][2], tables[2][2]}) == 3  # the partial block, copied once per request
    assert kinds.tolist() == [[1, 1, 2, 0], [1, 1, 3, 4], [1, 1, 3, 4]]
    glued = chapter["glued"]
    assert (glued["ch20_shared_tokens_16"], glued["ch20_own_tokens_16"]) == (992, 8)
    assert (glued["ch20_shared_tokens_256"], glued["ch20_own_tokens_256"]) == (768, 232)
    from lessons import assert_draws_without_warnings

    assert_draws_without_warnings(chapter["fork_fig"])


@pytest.mark.cjk_font
def test_selecting_before_the_mask_is_shown_as_a_bug_with_its_figure(chapter):
    kept_first, kept_late, lost = chapter["kept_first"], chapter["kept_late"], chapter["lost"]
    rows = np.arange(1, 13)
    assert (kept_first.sum(axis=1) == np.minimum(3, rows)).all()
    assert (kept_late.sum(axis=1) + lost.sum(axis=1) == 3).all()  # three picked per row, some of them future
    short = int((kept_late.sum(axis=1) < kept_first.sum(axis=1)).sum())
    assert chapter["glued"]["ch20_small_short_rows"] == short > 0
    body = prose(CHAPTER)
    assert "常见说法是“先挑出 top-k" not in body  # a bug, not a claim
    from lessons import assert_draws_without_warnings

    assert_draws_without_warnings(chapter["topk_fig"])
    assert [ax.get_title() for ax in chapter["topk_fig"].axes] == ["先掩码，再挑", "先挑，再掩码"]


# --------------------------------------------------------------------------- the review of part 6 (hints)

def _feedback(*names: str, cell: str, hidden: bool = False) -> dict[str, tuple[float, str]]:
    """``{name: (score, printed)}`` of ``cell`` for each kept wrong answer ``name`` (the visible tests by default)."""
    from nbrun import execute, read_kept, source_notebook

    nb, found = source_notebook(ASSIGNMENT), {}
    for name in names:
        kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / f"{name}.py")
        scores, out = execute(nb, replace=kept.cells, hidden=hidden)
        found[name] = scores[cell], out[cell]
    return found


def _hints(printed: str) -> list[str]:
    return [line for line in printed.splitlines() if "提示" in line]


def test_a_mask_that_keeps_k_picks_is_named_as_such_and_never_as_no_mask():
    """Masking to −inf and keeping k stable picks (the −inf ones never dropped) used to be told "没有加因果掩码" by
    the count check, where it and no mask at all both select k keys per row.  The count check and "k 比键数还多"
    list neither now; the first check, where the two differ, names each."""
    got = _feedback("topk_masked_keeps_k", "topk_no_causal_mask", cell="test_topk_mask", hidden=True)
    kept_k, no_mask = (got[n][1] for n in ("topk_masked_keeps_k", "topk_no_causal_mask"))
    assert _hints(kept_k) and all("被掩码的（未来的）键补足了 k 个" in line for line in _hints(kept_k)), kept_k
    assert _hints(no_mask) and all("没有加因果掩码" in line for line in _hints(no_mask)), no_mask
    for printed in (kept_k, no_mask):
        for label in ("每个查询选中 min(k, i + 1) 个键", "k 比键数还多"):
            lines = printed.split(label)[1].split("\n✓")[0].split("\n✗")[0]
            assert "提示" not in lines, (label, printed)


def test_ties_are_checked_visibly_on_enough_tied_scores_to_catch_an_unordered_pick():
    """np.argpartition breaks ties in no fixed order: a 6 x 6 check with one tied row let it through Validate with
    full marks.  The visible tie check has 24 queries and 8 keys per score value; it fails there and says where."""
    score, printed = _feedback("topk_argpartition", cell="test_topk_mask")["topk_argpartition"]
    assert score <= 1 and "提示" not in printed and "个数不一致" in printed, printed


def test_each_block_count_mistake_is_named_on_lengths_that_separate_them_all():
    """full + Σ⌈(n − prefix)/B⌉ (the partial block and its copies forgotten) gave 8 = the share_partial count on
    [30, 41, 27] and was told it shared the partial block; it has its own model now, on lengths where the right
    count and all six models differ."""
    full, prefix, size, lengths = 2, 21, 8, [22, 23, 25, 26]
    part, own = 3, [n - full * size for n in lengths]
    counts = {
        "right": full + sum(-(-m // size) for m in own), "floor": full + sum(m // size for m in own),
        "share_partial": part + sum(max(0, -(-(n - part * size) // size)) for n in lengths),
        "no_sharing": sum(-(-n // size) for n in lengths),
        "own_from_new_block": part + sum(-(-(n - prefix) // size) for n in lengths),
        "parent_kept": full + sum(-(-m // size) for m in own) + 1,
        "copies_not_counted": full + sum(-(-(n - prefix) // size) for n in lengths),
    }
    assert list(counts.values()) == [8, 4, 5, 14, 7, 9, 6]
    got = _feedback("blocks_copies_not_counted", "blocks_share_partial", "blocks_own_from_new_block",
                    cell="test_blocks_needed")
    says = {"blocks_copies_not_counted": "既没有算共用，也没有算每个请求复制的那一份",
            "blocks_share_partial": "把前缀半满的最后一块也当成共用的", "blocks_own_from_new_block": "复制的半满块没算"}
    for name, (score, printed) in got.items():
        assert score <= 1 and _hints(printed) and all(says[name] in line for line in _hints(printed)), printed


def test_the_boundary_check_tells_ceil_from_the_next_boundary():
    """On positions 3 and 4 alone ⌈t / B⌉ and (t + 1) // B give the same blocks, so a ceiling was told "(t + 1) // B";
    position 5 separates them."""
    from nbrun import execute, read_kept, source_notebook

    kept = read_kept(ROOT / "grading" / "wrong" / ASSIGNMENT / "block_index_next_boundary.py")
    ceil = {"block_slot": kept.cells["block_slot"].replace("(t + 1) // block_size", "-(-t // block_size)")}
    assert ceil["block_slot"] != kept.cells["block_slot"]
    nb = source_notebook(ASSIGNMENT)
    for cells, named in ((kept.cells, True), (ceil, False)):
        _, out = execute(nb, replace=cells, hidden=False)
        boundary = out["test_block_slot"].split("块的边界")[1].split("\n✓")[0].split("\n✗")[0]
        assert ("块的下标用了 (t + 1) // B" in boundary) is named, boundary


def test_a_fork_that_shares_the_table_list_is_not_told_the_count_was_kept():
    """A fork giving the child the parent's own list leaks a block when all three sequences are freed, as a kept
    count does: the last check compares only ({}, free blocks), so it names neither; the first check's values show
    the child reading the parent's token."""
    score, printed = _feedback("fork_shares_table", cell="test_block_pool")["fork_shares_table"]
    assert score <= 1 and "提示" not in printed and "'c': [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 200.0]" in printed, printed


def test_the_offset_pitfall_says_where_each_mistake_fails():
    pitfall = next(line for line in prose(CHAPTER).splitlines() if "块内偏移差一" in line)
    assert "恰好在块的边界上出错" not in pitfall and "每个词元都差一个槽" in pitfall
    for size in (4, 16):
        t = np.arange(8 * size)
        wrong_block = (t + 1) // size != t // size
        assert (wrong_block == (t % size == size - 1)).all()  # (t + 1) // B: only each block's last token
        assert ((t % size + 1) != t % size).all() and (t % size + 1).max() == size  # every slot, up to B
    assert "{glue:text}`ch20_cpus` 个逻辑 CPU" in prose(CHAPTER) and "个 CPU 核" not in prose(CHAPTER)
