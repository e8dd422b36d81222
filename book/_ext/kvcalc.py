"""Sphinx extension: a KV-cache memory calculator in the page (chapters 11 and 16).

Usage in a MyST page; every option is optional and the defaults are chapter 11's
model (32 layers, 32 heads, d_head 128, float16, 4096 tokens, batch 8)::

    ```{kvcalc}
    :kv-heads: 8
    ```

Options: ``layers``, ``heads``, ``kv-heads`` (default: ``heads``), ``d-head``,
``dtype`` (float32, float16, bfloat16 or int8), ``tokens``, ``batch``.

The directive writes a form of plain HTML inputs (each with its ``<label>``)
and an ``aria-live`` result box; the bundled ``kvcalc.js`` recomputes on every
change, in the reader's browser: no kernel, no network.  The cache size is the
formula of ``attnlib``'s ``KVCache.nbytes``::

    bytes = layers x 2 x tokens x kv_heads x d_head x bytes per number x batch

and the weights are chapter 11's estimate, ``12 d_model^2 L`` numbers with
``d_model = heads x d_head``; with fewer key/value heads ``W_K`` and ``W_V``
shrink (chapter 16): ``(10 d_model^2 + 2 d_model kv_heads d_head) L``.
:func:`cache_bytes` and :func:`weight_numbers` state the same two formulas in
Python for the tests.
"""

from __future__ import annotations

import re
from html import escape
from pathlib import Path

import static_assets
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util.docutils import SphinxDirective

__version__ = "1.0"

STATIC = Path(__file__).parent / "kvcalc_static"

#: Bytes per number of the data types offered, in the order of the menu.
DTYPES = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1}

#: Chapter 11's model.
DEFAULTS = {"layers": 32, "heads": 32, "kv-heads": None, "d-head": 128, "dtype": "float16", "tokens": 4096,
            "batch": 8}

#: The number fields, the data type's menu between the fourth and the fifth: (option, label HTML).
FIELDS = (
    ("layers", "层数 <var>L</var>"),
    ("heads", "查询头数 <var>h</var>"),
    ("kv-heads", "键值头数 <var>h</var><sub>kv</sub>"),
    ("d-head", "每个头的宽度 <var>d</var><sub>head</sub>"),
    ("tokens", "上下文长度 <var>n</var>（词元数）"),
    ("batch", "批量 <var>B</var>（序列数）"),
)


def cache_bytes(layers: int, kv_heads: int, d_head: int, bytes_per: int, tokens: int, batch: int) -> int:
    """``L x 2 x n x h_kv x d_head x b x B``: bytes of the cached keys and values (``KVCache.nbytes``)."""
    return layers * 2 * tokens * kv_heads * d_head * bytes_per * batch


def weight_numbers(layers: int, heads: int, kv_heads: int, d_head: int) -> int:
    """Numbers in the layers' weights: ``12 d_model^2 L`` with ``h_kv = h``, W_K and W_V shrinking with ``h_kv``.

    Per layer W_Q and W_O are ``d_model x h d_head`` each, W_K and W_V ``d_model x h_kv d_head`` each,
    the MLP (width ``4 d_model``) ``8 d_model^2``; ``d_model = h d_head``.
    """
    d_model = heads * d_head
    return layers * (10 * d_model**2 + 2 * d_model * kv_heads * d_head)


class kvcalc_node(nodes.General, nodes.Element):  # noqa: N801 - docutils node naming
    """The calculator; ``values`` (dict of the defaults) and ``base``, the prefix of its ids.

    ``base`` names the page and the calculator's number in it, so the ids stay unique when
    a single-page build puts all chapters into one HTML file.
    """


def _positive(name: str):
    def convert(text: str | None) -> int:
        try:
            value = int(str(text).strip())
        except ValueError:
            raise ValueError(f"{name} 必须是正整数，收到 {text!r}") from None
        if value < 1:
            raise ValueError(f"{name} 必须是正整数，收到 {value}")
        return value
    return convert


def _dtype(text: str | None) -> str:
    value = str(text).strip()
    if value not in DTYPES:
        raise ValueError(f"dtype 必须是 {'、'.join(DTYPES)} 之一，收到 {value!r}")
    return value


def check_values(options: dict) -> dict:
    """Defaults filled in and checked; raises ValueError (Chinese message) on a bad combination."""
    values = {**DEFAULTS, **options}
    if values["kv-heads"] is None:
        values["kv-heads"] = values["heads"]
    if values["heads"] % values["kv-heads"]:
        raise ValueError(f"查询头数 heads={values['heads']} 必须是键值头数 kv-heads={values['kv-heads']} 的整数倍")
    return values


class KVCalcDirective(SphinxDirective):
    """``{kvcalc}``: the interactive KV-cache memory calculator."""

    has_content = False
    option_spec = {name: _positive(name) for name, _ in FIELDS} | {"dtype": _dtype}

    def run(self) -> list[nodes.Node]:
        try:
            values = check_values(self.options)
        except ValueError as exc:
            raise self.error(f"kvcalc：{exc}") from None
        page = re.sub(r"[^A-Za-z0-9]+", "-", self.env.docname).strip("-")
        return [kvcalc_node(values=values, base=f"kvcalc-{page}-{self.env.new_serialno('kvcalc')}")]


# --------------------------------------------------------------------------- HTML

def render(values: dict, base: str) -> str:
    """The calculator's HTML (before the script fills in the result); every id starts with ``base``."""
    out = [f'<section class="kvcalc" id="{base}" aria-labelledby="{base}-title">',
           f'<p class="kvcalc-title" id="{base}-title">KV 缓存内存计算器</p>',
           '<p class="kvcalc-help">改动任意一个数，结果立即更新。计算在你的浏览器里完成，不联网，也不需要内核。</p>',
           f'<form class="kvcalc-form" id="{base}-form" novalidate>']
    for name, label in FIELDS[:4]:
        out.append(_number_field(base, name, label, values[name]))
    out.append(f'<div class="kvcalc-field kvcalc-dtype"><label for="{base}-dtype">数据类型（<var>b</var> 字节）</label>'
               f'<select id="{base}-dtype" name="dtype">')
    for dtype, size in DTYPES.items():
        selected = " selected" if dtype == values["dtype"] else ""
        out.append(f'<option value="{dtype}" data-bytes="{size}"{selected}>{dtype}（{size} 字节）</option>')
    out.append("</select></div>")
    for name, label in FIELDS[4:]:
        out.append(_number_field(base, name, label, values[name]))
    out.append('<div class="kvcalc-actions"><button type="reset" class="kvcalc-reset">恢复默认值</button></div>')
    out.append("</form>")
    out.append(f'<div class="kvcalc-result" id="{base}-result" role="status" aria-live="polite" aria-atomic="true">'
               "</div>")
    out.append('<noscript><p class="kvcalc-error">这个计算器需要浏览器启用 JavaScript。</p></noscript>')
    out.append("</section>")
    return "\n".join(out)


def _number_field(base: str, name: str, label: str, value: int) -> str:
    field = f"{base}-{name}"
    return (f'<div class="kvcalc-field"><label for="{field}">{label}</label>'
            f'<input id="{field}" name="{name}" type="number" inputmode="numeric" min="1" step="1" '
            f'value="{escape(str(value))}" required aria-describedby="{field}-msg">'
            f'<span class="kvcalc-msg" id="{field}-msg"></span></div>')


def _visit(self, node):
    self.body.append(render(node["values"], node["base"]))
    raise nodes.SkipNode


def _visit_text(self, node):
    """Builders without a browser (LaTeX, text, ...) leave the calculator out: the prose states the formula."""
    raise nodes.SkipNode



def setup(app: Sphinx) -> dict:
    others = {fmt: (_visit_text, None) for fmt in ("latex", "text", "man", "texinfo")}
    app.add_node(kvcalc_node, html=(_visit, None), **others)
    app.add_directive("kvcalc", KVCalcDirective)
    static_assets.ship(app, STATIC, "kvcalc.css", "kvcalc.js")
    return {"version": __version__, "parallel_read_safe": True, "parallel_write_safe": True}
