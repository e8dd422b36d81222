"""Sphinx extension: the attnlib API reference, generated from the docstrings at build time.

Usage in a MyST page::

    ```{attnlib-api}
    ```

For every public name of ``attnlib.numpy`` (``__all__``), in the order of the
chapters that teach them, the directive emits (as MyST, parsed in place) a
rubric, a link to the chapter, and the NumPy and the torch version side by
side (a two-column grid, each card filled by ``autodoc`` from the docstring).  The build fails, with a
Chinese message, when a public name has no docstring, when the two backends
do not export the same names, or when a name has no chapter in
:data:`CHAPTER_OF`.
"""

from __future__ import annotations

import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx import addnodes
from sphinx.application import Sphinx
from sphinx.errors import ExtensionError
from sphinx.util.docutils import SphinxDirective

__version__ = "1.0"

#: The chapter (page name under book/) that teaches each public name, in reading order.
CHAPTER_OF = {
    "qkv_projection": "ch02-qkv",
    "attention_scores": "ch03-scores",
    "cosine_scores": "ch03-scores",
    "sample_dot_products": "ch04-scaling",
    "dot_product_variance": "ch04-scaling",
    "weight_entropy": "ch04-scaling",
    "softmax_grad_norm": "ch04-scaling",
    "softmax": "ch05-softmax",
    "scaled_dot_product_attention": "ch06-attention",
    "attention_loop": "ch07-parallel",
    "rnn_scan": "ch07-parallel",
    "causal_mask": "ch08-masks",
    "padding_mask": "ch08-masks",
    "split_heads": "ch09-multihead",
    "merge_heads": "ch09-multihead",
    "multi_head_attention": "ch09-multihead",
    "flash_attention": "ch10-efficiency",
    "sliding_window_mask": "ch10-efficiency",
    "sliding_window_attention": "ch10-efficiency",
    "linear_attention": "ch10-efficiency",
    "KVCache": "ch11-kv-cache",
    "cached_attention": "ch11-kv-cache",
    "sinusoidal_positions": "ch15-positions",
    "apply_rope": "ch15-positions",
    "alibi_bias": "ch15-positions",
    "grouped_query_attention": "ch16-gqa",
    "multi_head_latent_attention": "ch17-mla",
    "LatentKVCache": "ch17-mla",
    "latent_attention_step": "ch17-mla",
    "flash_attention_backward": "ch18-backward",
    "delta_rule": "ch19-delta",
    "chunked_delta_rule": "ch19-delta",
    "PagedKVCache": "ch20-serving",
    "paged_attention": "ch20-serving",
    "topk_sparse_attention": "ch20-serving",
    "lightning_indexer_scores": "ch20-serving",
    "rms_norm": "ch21-real-model",
    "LlamaModel": "ch21-real-model",
    "sink_attention": "ch22-sinks",
    "streaming_mask": "ch22-sinks",
    "SinkKVCache": "ch22-sinks",
    "quantize_kv": "ch23-kv-compression",
    "dequantize_kv": "ch23-kv-compression",
    "QuantizedKV": "ch23-kv-compression",
    "quantized_nbytes": "ch23-kv-compression",
    "heavy_hitters": "ch23-kv-compression",
    "h2o_keep": "ch23-kv-compression",
    "snapkv_keep": "ch23-kv-compression",
    "compress_cache": "ch23-kv-compression",
    "accept_drafts": "ch24-speculative",
    "residual_distribution": "ch24-speculative",
    "tree_mask": "ch24-speculative",
    "tree_positions": "ch24-speculative",
    "gather_path": "ch24-speculative",
    "early_exit": "ch24-speculative",
    "verify_tree": "ch24-speculative",
    "speculative_generate": "ch24-speculative",
}
BACKENDS = (("NumPy", "attnlib.numpy"), ("PyTorch", "attnlib.torch"))


def public_names() -> list[str]:
    """The names both backends export, in the order of :data:`CHAPTER_OF`; errors in Chinese otherwise."""
    modules = [importlib.import_module(path) for _, path in BACKENDS]
    names = [sorted(m.__all__) for m in modules]
    if names[0] != names[1]:
        raise ExtensionError(f"attnlib.numpy 与 attnlib.torch 导出的名字不同：{sorted(set(names[0]) ^ set(names[1]))}")
    missing = sorted(set(names[0]) - set(CHAPTER_OF))
    if missing:
        raise ExtensionError(f"这些公开函数还没有登记讲它们的章节（book/_ext/apidoc.py 的 CHAPTER_OF）：{missing}")
    for (_, path), module in zip(BACKENDS, modules, strict=True):
        undocumented = [n for n in names[0] if not (inspect.getdoc(getattr(module, n)) or "").strip()]
        if undocumented:
            raise ExtensionError(f"{path} 的这些公开函数没有文档字符串（docstring）：{undocumented}")
    return [n for n in CHAPTER_OF if n in set(names[0])]


def entry(name: str, written=None) -> list[str]:
    """The MyST of one name: a rubric, the chapter link, and both backends side by side (autodoc).

    ``written``: the book's pages (docnames); a chapter not among them is named, not linked.
    """
    kind = "autoclass" if inspect.isclass(getattr(importlib.import_module(BACKENDS[0][1]), name)) else "autofunction"
    chapter = CHAPTER_OF[name]
    if written is None or f"book/{chapter}" in written:
        where = f"讲解它的章节：{{doc}}`{chapter}`"
    else:
        where = f"讲解它的章节：第 {int(chapter[2:4])} 章（还在编写）"
    lines = [f"```{{rubric}} {name}", "```", "", where, "",
             ":::::{grid} 1 1 2 2", ":gutter: 2", ""]
    for label, path in BACKENDS:
        # autodoc writes reStructuredText, so it runs inside eval-rst
        lines += [f"::::{{grid-item-card}} {label}", "```{eval-rst}", f".. {kind}:: {path}.{name}"]
        lines += ["   :members:"] if kind == "autoclass" else []
        lines += ["```", "::::", ""]
    return lines + [":::::", ""]


def one_contents_entry_per_name(tree: nodes.Node) -> None:
    """The page's table of contents lists each name once: the PyTorch twins beside the NumPy entries get none.

    Each name's two cards sit side by side, so the NumPy entry's link lands on both; without this the
    contents would hold every name twice, with nothing telling the two apart.
    """
    for desc in tree.findall(addnodes.desc):
        signatures = [s for s in desc.children if isinstance(s, addnodes.desc_signature)]
        if any(str(s.get("module", "")).startswith(BACKENDS[1][1]) for s in signatures):
            desc["no-contents-entry"] = desc["nocontentsentry"] = True


class AttnlibApi(SphinxDirective):
    """``{attnlib-api}``: the whole reference."""

    has_content = False

    def run(self):
        rst = StringList()
        for name in public_names():
            for line in entry(name, self.env.found_docs):
                rst.append(line, "<attnlib-api>")
        container = nodes.container()
        self.state.nested_parse(rst, self.content_offset, container)
        one_contents_entry_per_name(container)
        pages = getattr(self.env, "attnlib_api_pages", set())
        pages.add(self.env.docname)
        self.env.attnlib_api_pages = pages
        return container.children


def always_outdated(app, env, added, changed, removed) -> list[str]:
    """The reference page is read again at every build: the docstrings it shows live outside the book."""
    return sorted(getattr(env, "attnlib_api_pages", set()) - set(removed))


def merge_pages(app, env, docnames, other) -> None:
    """Parallel reads: keep the pages that hold the reference, whichever process read them."""
    env.attnlib_api_pages = getattr(env, "attnlib_api_pages", set()) | getattr(other, "attnlib_api_pages", set())


def setup(app: Sphinx) -> dict:
    app.add_directive("attnlib-api", AttnlibApi)
    app.connect("env-get-outdated", always_outdated)
    app.connect("env-merge-info", merge_pages)
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
