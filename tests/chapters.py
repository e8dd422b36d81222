"""The course's chapters in one table: what the shared contract (``tests/test_chapters.py``) needs to know of each.

Every chapter of ``_toc.yml`` (``book/chNN-*``) must have a row here, so a new
chapter is held to the contract as soon as it is in the book: its page has the
usual shape, its glued numbers are glued by its cells, its code fits the page,
its self-check is small, and its assignment releases and grades as the table
says (``assignments.grade`` checks that with nbgrader for the chapter's own
test).  What a chapter claims beyond that stays in its ``tests/test_chNN.py``.
"""

from __future__ import annotations

import dataclasses
import pathlib
import re
import sys

import pytest
import yaml
from lessons import ROOT, run_lesson_glued

if str(ROOT) not in sys.path:  # grading.* (nbgrader's course, the validator) is imported from the repository
    sys.path.insert(0, str(ROOT))

BOOK = ROOT / "book"
TERMS = ("词元（token）", "查询（query）", "键（key）", "值（value）")  # glossed in most chapters: Chinese（English）


@dataclasses.dataclass(frozen=True)
class Chapter:
    """One lesson chapter; its page is ``book/<name>.md``, its self-check and assignment carry the same name.

    Attributes
    ----------
    name : str
        ``chNN-topic``: the page, ``selfchecks/<name>.yml`` and the assignment id.
    points : dict
        ``{autograded test cell: points}`` of the assignment, in the notebook's order.
    released : tuple of str
        What the student version must offer (the functions and classes the exercises ask for).
    written : int
        Points of the written answer, graded by hand; the notebook's maximum is ``sum(points) + written``.
    terms : tuple of str
        Terms the prose glosses, ``中文（English）``; ``词元（token）`` among them is glossed where 词元 first appears.
    pitfalls : str or None
        The heading of the page's pitfalls section (``None``: the page has none).
    columns : int or None
        The widest code line the page may have, in display columns (a Chinese character takes two); the book's
        boxes show 74. ``None``: not held to a width.
    answers : tuple of str or None
        The self-check's correct options, question by question (``"AC"``: A and C); ``None``: not pinned here.
    executed : bool
        Whether the chapter's tests run its lesson in this process (then its glued values are checked too).
    glue_fills : dict
        ``{placeholder: values}`` for glue names built by an f-string (``f"ch10_{name}_sharp_first"``); a
        placeholder not listed stands for any name.
    """

    name: str
    points: dict
    released: tuple
    written: int = 2
    terms: tuple = TERMS
    pitfalls: str | None = "常见的坑"
    columns: int | None = 74
    answers: tuple | None = None
    executed: bool = True
    glue_fills: dict = dataclasses.field(default_factory=dict)

    @property
    def page(self) -> pathlib.Path:
        return BOOK / f"{self.name}.md"

    @property
    def selfcheck(self) -> pathlib.Path:
        return BOOK / "selfchecks" / f"{self.name}.yml"

    @property
    def prefix(self) -> str:
        """What every glued name of the chapter starts with: ``ch06_``."""
        return self.name.split("-")[0] + "_"

    @property
    def max_score(self) -> int:
        return sum(self.points.values()) + self.written

    def __str__(self) -> str:
        return self.name


EARLY = 105  # chapters 1 to 7 were written before the 74-column rule; their lines stay under this


# The one table, in the book's order. The chapters of the toc that are not lessons are in NOT_LESSONS.
CHAPTERS: list[Chapter] = [
    Chapter("ch01-pipeline", columns=EARLY, released=("def scaled_scores",),
            points={"test_projections": 2, "test_scaled_scores": 3, "test_attention": 3}),
    Chapter("ch02-qkv", columns=EARLY, released=("class SelfAttention",),
            points={"test_qkv_projection": 2, "test_self_attention": 4, "test_count_parameters": 2}),
    Chapter("ch03-scores", columns=EARLY, pitfalls="容易出错的地方", released=("def rank_keys",),
            points={"test_scores_double_loop": 2, "test_scores_one_loop": 2,
            "test_scores_matrix": 2, "test_rank_keys": 2}),
    Chapter("ch04-scaling", terms=("查询（query）", "键（key）"), columns=EARLY, pitfalls="容易出错的地方",
            released=("def row_entropy",),
            points={"test_dot_product_variance": 3, "test_scaled_scores": 2,
            "test_row_entropy": 3}),
    # the pilot: its page is tested with the built book (test_book.py), its lesson runs only there
    Chapter("ch05-softmax", terms=TERMS[1:], columns=None, pitfalls=None, executed=False,
            released=("def softmax_stable", "def softmax_temperature", "def masked_softmax"),
            points={"test_softmax_stable": 3, "test_softmax_temperature": 2,
            "test_masked_softmax": 3}),
    Chapter("ch06-attention", columns=EARLY, pitfalls="容易出错的地方", answers=("B", "C", "AC", "D"),
            released=("def scaled_dot_product_attention", "class SelfAttention"),
            points={"test_sdpa": 4, "test_self_attention": 2, "test_permutation": 2}),
    Chapter("ch07-parallel", columns=EARLY, pitfalls=None, answers=("B", "A", "C", "D"),
            released=("def attention_loop", "def compare_times"),
            points={"test_attention_loop": 3, "test_attention_matrix": 2, "test_compare_times": 3}),
    Chapter("ch08-masks", terms=(*TERMS, "掩码（mask）"), answers=("B", "ACD", "D", "C"),
            released=("def causal_mask", "def padding_mask", "def decoder_mask", "def masked_attention",
            "def cross_attention"),
            points={"test_causal_mask": 2, "test_padding_mask": 1, "test_decoder_mask": 1,
            "test_masked_attention": 2, "test_cross_attention": 2}),
    Chapter("ch09-multihead", terms=(*TERMS, "多头注意力（multi-head attention）"), answers=("A", "C", "AC", "B"),
            released=("def split_heads", "def merge_heads", "def multi_head_attention",
            "def count_parameters"),
            points={"test_split_merge": 2, "test_multi_head_attention": 4,
            "test_count_parameters": 2}),
    Chapter("ch10-efficiency", answers=("B", "C", "AD", "D"), glue_fills={"name": ("soft", "lin")},
            released=("def sliding_window_attention", "def linear_attention", "def linear_error",
            "def stream_max_and_sum", "def online_softmax", "def tiled_attention"),
            points={"test_sliding_window_attention": 3, "test_linear_attention": 2,
            "test_online_softmax": 2, "test_tiled_attention": 3}),
    Chapter("ch11-kv-cache", answers=("B", "AC", "D", "A"),
            released=("class KVCache", "def cached_attention_step", "def kv_cache_bytes"),
            points={"test_kv_cache": 3, "test_cached_attention_step": 3, "test_kv_cache_bytes": 2}),
    Chapter("ch12-applications", answers=("B", "A", "B", "AB"),
            released=("def retrieve", "def read_alignment", "def greedy_decode"),
            points={"test_retrieve": 2, "test_read_alignment": 2, "test_greedy_decode": 4}),
    # eight misconceptions, each its own section: no pitfalls section; its measuring code is wider than the rule
    Chapter("ch13-misconceptions", terms=("查询（query）",), pitfalls=None, columns=None,
            released=("def occlusion_effect",),
            points={"test_cosine_scores": 3, "test_occlusion_effect": 3,
            "test_softmax_backward": 2}),
    Chapter("ch15-positions", answers=("C", "B", "D", "AC"), glue_fills={"kind": ("none", "sin", "rope")},
            terms=(*TERMS, "位置编码（positional encoding）", "旋转位置编码（rotary position embedding）",
                   "ALiBi（attention with linear biases）"),
            released=("def rope", "def alibi", "def rope_decode_step"),
            points={"test_rope": 3, "test_alibi": 2, "test_rope_decode_step": 3}),
    Chapter("ch16-gqa", answers=("B", "A", "AC", "C"),
            terms=(*TERMS, "多查询注意力（multi-query attention）", "分组查询注意力（grouped-query attention）"),
            released=("def grouped_query_attention", "def gqa_cache_bytes", "def pool_kv_heads"),
            points={"test_grouped_query_attention": 3, "test_gqa_cache_bytes": 2, "test_pool_kv_heads": 3}),
    Chapter("ch17-mla", answers=("B", "C", "AC", "A"),
            terms=(*TERMS, "多头潜在注意力（multi-head latent attention）", "潜在向量（latent vector）",
                   "权重吸收（weight absorption）", "解耦的 RoPE 键（decoupled RoPE key）"),
            released=("def mla_attention", "def absorbed_scores", "def cache_bytes", "def decode_step"),
            points={"test_mla_attention": 3, "test_absorbed_scores": 3, "test_cache_bytes": 2,
            "test_decode_step": 3}),
    Chapter("ch18-backward", answers=("B", "A", "AB", "C"),
            terms=(*TERMS, "反向传播（backward pass）", "对数求和指数（log-sum-exp）", "重计算（recomputation）",
                   "自定义 autograd 函数（custom autograd function）"),
            released=("def attention_backward", "def tiled_backward", "class AttentionFunction"),
            points={"test_attention_backward": 3, "test_tiled_backward": 3, "test_attention_function": 2}),
    Chapter("ch19-delta", answers=("B", "C", "AC", "A"),
            terms=(*TERMS, "状态矩阵（state matrix）", "delta 规则（delta rule）", "门控（gate）",
                   "分块形式（chunked form）"),
            released=("def delta_recurrence", "def gated_delta_layer", "def chunked_delta"),
            points={"test_delta_recurrence": 3, "test_gated_delta_layer": 2, "test_chunked_delta": 3}),
    Chapter("ch20-serving", answers=("B", "B", "AC", "A"),
            terms=(*TERMS, "分页 KV 缓存（paged KV cache）", "块表（block table）", "写时复制（copy-on-write）",
                   "前缀共享（prefix sharing）", "top-k 稀疏注意力（top-k sparse attention）", "索引器（indexer）"),
            released=("def block_slot", "def blocks_needed", "def topk_mask", "def topk_attention", "class BlockPool"),
            points={"test_block_slot": 2, "test_blocks_needed": 3, "test_topk_mask": 3, "test_topk_attention": 2,
                    "test_block_pool": 3}),
    Chapter("ch21-real-model", answers=("B", "C", "B", "AC"),
            terms=(*TERMS, "块量化（block quantization）", "均方根归一化（RMS normalization）", "困惑度（perplexity）",
                   "归纳头（induction head）"),
            released=("def dequantize_q4_1_block", "def rms_norm", "def attention_sublayer", "def induction_scores"),
            points={"test_dequantize_q4_1_block": 3, "test_rms_norm": 2, "test_attention_sublayer": 4,
                    "test_induction_scores": 3}),
    Chapter("ch22-sinks", answers=("B", "C", "AC", "A"),
            terms=(*TERMS, "注意力汇聚点（attention sink）", "流式生成（streaming generation）",
                   "滚动 KV 缓存（rolling KV cache）", "汇聚点 logit（sink logit）", "困惑度（perplexity）"),
            glue_fills={"s": ("0", "4"), "w": ("16", "32", "64"), "name": ("all", "late", "p", "new", "s", "w", "cap",
                        "last", "slot"), "key": ("plain", "one", "five")},
            released=("def sink_attention", "def streaming_mask", "class SinkCache"),
            points={"test_sink_attention": 3, "test_streaming_mask": 2, "test_sink_cache": 3}),
    Chapter("ch23-kv-compression", answers=("B", "B", "AC", "C"),
            terms=(*TERMS, "缓存驱逐（cache eviction）", "困惑度（perplexity）",
                   "非对称量化（asymmetric quantization）", "重要词元（heavy hitter）"),
            glue_fills={"bits": ("16", "8", "4", "2"), "key": ("ch", "tok"), "tag": ("streamingllm", "h2o", "snapkv"),
                        "budget": ("64", "128")},
            released=("def quantize", "def dequantize", "def h2o_keep", "def kivi_roundtrip", "def compressed_bytes"),
            points={"test_quantize": 3, "test_h2o_keep": 3, "test_kivi": 2}),
    Chapter("ch24-speculative", answers=("C", "C", "AC", "B"),
            terms=(*TERMS, "推测解码（speculative decoding）", "草稿模型（draft model）", "目标模型（target model）",
                   "早退（early exit）", "树形注意力（tree attention）"),
            released=("def accept_step", "def tree_mask_and_positions", "def verify_step"),
            points={"test_accept_step": 3, "test_tree_mask": 3, "test_verify_step": 3}),
]

NOT_LESSONS = {"ch14-interview": "interview questions, no exercises: tested in test_ch14.py"}
BY_NAME = {c.name: c for c in CHAPTERS}


def toc_chapters() -> list[str]:
    """The chapter pages of ``_toc.yml`` (``book/chNN-*``), in the book's order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text(encoding="utf-8"))
    return [entry["file"].removeprefix("book/") for part in toc["parts"] for entry in part["chapters"]
            if re.fullmatch(r"book/ch\d\d-[\w-]+", entry["file"])]


# --------------------------------------------------------------------------- a lesson, run once

_GLUED: dict[str, dict] = {}  # what each lesson run in this session glued
_WAITING: dict[str, dict] = {}  # a lesson the contract ran before its chapter's tests: theirs to take


def lesson(name: str) -> dict:
    """The namespace of the lesson ``book/<name>.md`` (:func:`lessons.run_lesson_glued`), run once a session.

    Run for the contract's :func:`glued` before the chapter's own tests, the namespace waits for their fixture
    (and is dropped when they take it); run by them first, only what it glued is kept.
    """
    if name in _WAITING:
        return _WAITING.pop(name)
    namespace = run_lesson_glued(BOOK / f"{name}.md")
    _GLUED[name] = namespace["glued"]
    return namespace


def glued(name: str) -> dict:
    """What the lesson glued, from its one run in this session."""
    if name not in _GLUED:
        _WAITING[name] = lesson(name)
    return _GLUED[name]


def lesson_fixture(name: str):
    """The module fixture ``chapter`` of a chapter's tests: the namespace its lesson's cells leave behind."""

    @pytest.fixture(scope="module")
    def chapter() -> dict:
        return lesson(name)

    chapter.__doc__ = f"The namespace left by running every code cell of {name}; ``glued`` holds what they glued."
    return chapter


# --------------------------------------------------------------------------- the self-check

def questions(name: str) -> list[dict]:
    """The questions of ``book/selfchecks/<name>.yml``."""
    return yaml.safe_load((BOOK / "selfchecks" / f"{name}.yml").read_text(encoding="utf-8"))["questions"]


def correct(question: dict) -> list[str]:
    """The texts of a question's correct options."""
    return [o["text"] for o in question["options"] if o.get("correct")]


def correct_indices(question: dict) -> list[int]:
    return [i for i, o in enumerate(question["options"]) if o.get("correct")]


def letters(question: dict) -> str:
    """A question's correct options as letters: ``"AC"``."""
    return "".join("ABCDEFGH"[i] for i in correct_indices(question))
