"""The KV-cache memory calculator (book/_ext/kvcalc.py): formulas, the directive, and the numbers in Chromium.

A tiny Sphinx project with the ``kvcalc`` extension is built in a temporary directory
with ``-W`` (seconds, not a book build); headless Chromium then types configurations
into the form and every number the page shows is checked against attnlib's
``KVCache.nbytes`` and chapter 11/16's weight formula.  The same check
(:func:`check_calculator`) runs on the real chapters 11 and 16 of the one book build
of the suite in tests/test_browser.py.
"""

from __future__ import annotations

import math
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import torch

from attnlib import numpy as anp
from attnlib import torch as att

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"

sys.path.insert(0, str(EXT))
import kvcalc  # noqa: E402  (the extension module itself)

sys.path.remove(str(EXT))

#: Chapter 11's model as the form's fields: layers, heads, kv-heads, d-head, dtype, tokens, batch.
CH11 = {"layers": 32, "heads": 32, "kv-heads": 32, "d-head": 128, "dtype": "float16", "tokens": 4096, "batch": 8}
CH16 = {**CH11, "kv-heads": 8}

#: Configurations typed into the calculator: GQA, MQA, float32, bfloat16, int8, batch 1, long contexts.
CONFIGS = [
    {**CH11, "tokens": 131072, "batch": 1, "kv-heads": 8},  # a long context with GQA: 16 GiB
    {"layers": 24, "heads": 16, "kv-heads": 4, "d-head": 64, "dtype": "float32", "tokens": 1000, "batch": 2},
    {"layers": 4, "heads": 8, "kv-heads": 8, "d-head": 32, "dtype": "float32", "tokens": 512, "batch": 1},
    {"layers": 2, "heads": 4, "kv-heads": 1, "d-head": 16, "dtype": "bfloat16", "tokens": 131072, "batch": 1},
    {"layers": 12, "heads": 12, "kv-heads": 12, "d-head": 64, "dtype": "int8", "tokens": 2048, "batch": 4},
    {"layers": 80, "heads": 64, "kv-heads": 8, "d-head": 128, "dtype": "float16", "tokens": 32768, "batch": 16},
    {"layers": 1, "heads": 1, "kv-heads": 1, "d-head": 1, "dtype": "float32", "tokens": 3, "batch": 100},  # bytes
]

#: Storage dtypes of attnlib's caches (int8: attnlib stores floats only, see attnlib_nbytes).
STORE = {"float32": np.float32, "float16": np.float16, "bfloat16": torch.bfloat16}
DIRECT_LIMIT = 64 * 2**20  # caches up to this size are really filled; larger ones are measured per token


def attnlib_nbytes(c: dict) -> int:
    """``KVCache(...).nbytes`` of configuration ``c`` after appending its tokens to every layer.

    Caches above 64 MiB are not allocated here: the cache is filled with one token, then two,
    and the bytes of one token (checked to grow linearly) are multiplied by the context length.
    attnlib stores floating-point numbers only, so an int8 cache is a float16 cache's bytes halved.
    """
    if c["dtype"] == "int8":
        half = attnlib_nbytes({**c, "dtype": "float16"})
        assert half % 2 == 0
        return half // 2
    size = kvcalc.cache_bytes(c["layers"], c["kv-heads"], c["d-head"], kvcalc.DTYPES[c["dtype"]], c["tokens"],
                              c["batch"])
    steps = [c["tokens"]] if size <= DIRECT_LIMIT else [1, 1]
    torch_cache = c["dtype"] == "bfloat16"
    lib = att if torch_cache else anp
    cache = lib.KVCache(c["layers"], c["heads"], c["d-head"], n_kv_heads=c["kv-heads"], capacity=sum(steps))
    seen = []
    for t in steps:
        shape = (c["batch"], c["kv-heads"], t, c["d-head"])
        x = torch.zeros(shape, dtype=STORE[c["dtype"]]) if torch_cache else np.zeros(shape, STORE[c["dtype"]])
        for layer in range(c["layers"]):
            cache.append(layer, x, x)
        seen.append(cache.nbytes)
    assert cache.length == sum(steps)
    if len(steps) == 1:
        return seen[0]
    assert seen[1] == 2 * seen[0], "the cache grows by the same bytes per token"
    return seen[0] * c["tokens"]


def chapter_weights(c: dict) -> int:
    """Numbers in the layers' weights, as chapters 11 and 16 compute them (not kvcalc.weight_numbers)."""
    d_model, layers = c["heads"] * c["d-head"], c["layers"]
    if c["kv-heads"] == c["heads"]:
        return 12 * d_model**2 * layers  # chapter 11: 4 d² attention + 8 d² MLP per layer
    attention = layers * (2 * d_model * c["heads"] * c["d-head"] + 2 * d_model * c["kv-heads"] * c["d-head"])
    return attention + 8 * d_model**2 * layers  # chapter 16: W_K, W_V are d_model × h_kv·d_head


def shown_size(text: str) -> int:
    """``"16.00 GiB"`` -> bytes, within the rounding of two decimals (checked by the caller)."""
    number, unit = re.fullmatch(r"([\d.]+) (TiB|GiB|MiB|KiB)", text.strip()).groups()
    return float(number) * 2 ** {"TiB": 40, "GiB": 30, "MiB": 20, "KiB": 10}[unit]


def assert_size(text: str, exact: int) -> None:
    if exact < 2**10:
        assert text == f"{exact:,} 字节", (text, exact)
        return
    unit = next(u for u, p in (("TiB", 40), ("GiB", 30), ("MiB", 20), ("KiB", 10)) if exact >= 2**p)
    assert text.endswith(unit), f"{exact} 字节应以 {unit} 显示，页面显示 {text}"
    assert abs(shown_size(text) - exact) <= 0.005 * 2 ** {"TiB": 40, "GiB": 30, "MiB": 20, "KiB": 10}[unit], (
        text, exact)


def _grouped(n: int) -> str:
    return f"{n:,}"


# --------------------------------------------------------------------------- formulas

@pytest.mark.parametrize("c", [CH11, CH16, *CONFIGS[1:5]])
def test_formulas_agree_with_attnlib_and_the_chapters(c):
    b = kvcalc.DTYPES[c["dtype"]]
    expected = kvcalc.cache_bytes(c["layers"], c["kv-heads"], c["d-head"], b, c["tokens"], c["batch"])
    assert attnlib_nbytes(c) == expected
    assert kvcalc.weight_numbers(c["layers"], c["heads"], c["kv-heads"], c["d-head"]) == chapter_weights(c)


def test_chapter_11_model_numbers():
    """Chapter 11's prose: 0.5 MiB a token, 2 GiB for 4096 tokens, 16 GiB for a batch of 8, weights 12 GiB."""
    assert kvcalc.cache_bytes(32, 32, 128, 2, 1, 1) == 2**19
    assert kvcalc.cache_bytes(32, 32, 128, 2, 4096, 8) == 16 * 2**30
    assert kvcalc.weight_numbers(32, 32, 32, 128) * 2 == 12 * 2**30
    assert kvcalc.cache_bytes(32, 8, 128, 2, 4096, 8) == 4 * 2**30  # chapter 16, h_kv = 8


# --------------------------------------------------------------------------- the directive

def test_options_fill_defaults_and_refuse_bad_heads():
    assert kvcalc.check_values({}) == {**CH11}
    assert kvcalc.check_values({"kv-heads": 8})["kv-heads"] == 8
    with pytest.raises(ValueError, match="整数倍"):
        kvcalc.check_values({"kv-heads": 5})
    spec = kvcalc.KVCalcDirective.option_spec
    assert spec["layers"]("12") == 12
    for bad in ("0", "-1", "x"):
        with pytest.raises(ValueError, match="正整数"):
            spec["tokens"](bad)
    with pytest.raises(ValueError, match="float32"):
        spec["dtype"]("float64")


def test_rendered_form_ties_every_label_to_its_input():
    html = kvcalc.render(kvcalc.check_values({"kv-heads": 8}), "kvcalc-book-ch16-gqa-3")
    ids = re.findall(r'<(?:input|select) id="([^"]+)"', html)
    assert len(ids) == 7 and len(set(ids)) == 7
    for field in ids:
        assert f'<label for="{field}">' in html, field
        assert field.startswith("kvcalc-book-ch16-gqa-3-")
    assert 'id="kvcalc-book-ch16-gqa-3-kv-heads" name="kv-heads" type="number"' in html and 'value="8"' in html
    assert '<option value="float16" data-bytes="2" selected>' in html
    assert 'aria-live="polite"' in html and "KV 缓存内存计算器" in html
    assert not re.search(r"[\u4e00-\u9fff]", "".join(re.findall(r'name="([^"]+)"', html)))


PAGE = """# 计算器

```{kvcalc}
```

```{kvcalc}
:kv-heads: 8
```
"""

CONF = f"""
import sys
sys.path.insert(0, {str(EXT)!r})
project = "kvcalc test"
language = "zh_CN"
extensions = ["myst_parser", "kvcalc"]
html_theme = "basic"
"""


def _sphinx(src: pathlib.Path, page: str) -> subprocess.CompletedProcess:
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    (src / "index.md").write_text(page, encoding="utf-8")
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(src), str(src / "_build")]
    return subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> pathlib.Path:
    src = tmp_path_factory.mktemp("kvcalc-src")
    proc = _sphinx(src, PAGE)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return src / "_build"


def test_directive_renders_two_calculators_and_ships_its_assets(built):
    html = (built / "index.html").read_text(encoding="utf-8")
    assert html.count('<section class="kvcalc"') == 2
    assert 'id="kvcalc-index-0-layers"' in html and 'id="kvcalc-index-1-layers"' in html  # unique ids
    assert re.search(r'<script[^>]+src="_static/kvcalc\.js', html)
    for asset in ("kvcalc.js", "kvcalc.css"):
        text = (built / "_static" / asset).read_text(encoding="utf-8")
        assert "http" not in text and "fetch(" not in text, asset


def test_bad_option_fails_the_build(tmp_path):
    proc = _sphinx(tmp_path, "# 页\n\n```{kvcalc}\n:heads: 32\n:kv-heads: 5\n```\n")
    assert proc.returncode != 0 and "整数倍" in proc.stderr


# --------------------------------------------------------------------------- in Chromium

def set_config(page, calc: str, c: dict) -> None:
    """Type configuration ``c`` into the calculator ``calc`` (a CSS selector) as a reader would."""
    for name, value in c.items():
        if name == "dtype":
            page.select_option(f"{calc} select[name='dtype']", value)
        else:
            page.fill(f"{calc} input[name='{name}']", str(value))


def result_text(page, calc: str) -> str:
    return page.inner_text(f"{calc} .kvcalc-result")


def check_numbers(page, calc: str, c: dict) -> dict:
    """Every number the calculator shows for ``c``, checked against attnlib and the chapters' formulas."""
    text = result_text(page, calc)
    assert "NaN" not in text and "undefined" not in text and "Infinity" not in text, text
    cache = attnlib_nbytes(c)
    b = kvcalc.DTYPES[c["dtype"]]
    weights = chapter_weights(c)
    get = lambda cls: page.inner_text(f"{calc} .{cls}")  # noqa: E731
    assert get("kvcalc-cache-bytes") == _grouped(cache), (c, text)
    assert_size(get("kvcalc-cache-size"), cache)
    factors = [c["layers"], 2, c["tokens"], c["kv-heads"], c["d-head"], b, c["batch"]]
    assert " × ".join(map(_grouped, factors)) + f" = {_grouped(cache)} 字节" in get("kvcalc-formula")
    per_token = cache // (c["tokens"] * c["batch"])
    assert_size(get("kvcalc-token-size"), per_token)
    assert get("kvcalc-weight-numbers") == _grouped(weights)
    assert_size(get("kvcalc-weight-size"), weights * b)
    formula = get("kvcalc-weights")
    assert ("12 × d_model² × L" in formula) == (c["kv-heads"] == c["heads"]), formula
    ratio = cache / (weights * b)
    shown = get("kvcalc-ratio")
    if ratio >= 1:
        assert shown.endswith(" 倍") and math.isclose(float(shown[:-2]), ratio, abs_tol=0.005), (shown, ratio)
    else:
        assert shown.endswith("%") and math.isclose(float(shown[:-1]), 100 * ratio, abs_tol=0.05), (shown, ratio)
    cross = weights * b // (per_token * c["batch"])
    if cross:
        assert get("kvcalc-cross") == _grouped(cross)
    else:
        assert "只缓存 1 个词元就比权重大" in get("kvcalc-compare")
    assert kvcalc.cache_bytes(c["layers"], c["kv-heads"], c["d-head"], b, cross, c["batch"]) <= weights * b
    assert kvcalc.cache_bytes(c["layers"], c["kv-heads"], c["d-head"], b, cross + 1, c["batch"]) > weights * b
    assert page.get_attribute(calc, "data-cache-bytes") == str(cache)
    return {"cache": cache, "weights": weights, "text": text}


#: Invalid entries: (field, value, a fragment of the Chinese message under the result, ... beside the field).
INVALID = [("layers", "", "请填写层数 L", "请填写层数 L"), ("tokens", "0", "上下文长度 n 至少为 1", "至少为 1"),
           ("batch", "-2", "批量 B 不能是负数", "不能是负数"), ("d-head", "2.5", "必须是正整数", "必须是正整数"),
           ("kv-heads", "5", "查询头数 h = 32 必须是键值头数 h_kv = 5 的整数倍", "h = 32 不是 5 的整数倍")]


def check_calculator(page, calc: str, defaults: dict, configs: list[dict]) -> list[dict]:
    """Defaults, each configuration, each invalid entry, then the reset button: all checked in the page."""
    page.wait_for_selector(f"{calc}.kvcalc-ready")
    shown = [check_numbers(page, calc, defaults)]
    for c in configs:
        set_config(page, calc, c)
        shown.append(check_numbers(page, calc, c))
    set_config(page, calc, defaults)
    for name, value, fragment, beside in INVALID:
        page.fill(f"{calc} input[name='{name}']", value)
        text = result_text(page, calc)
        assert fragment in text and text.startswith("无法计算"), (name, value, text)
        assert "NaN" not in text and "GiB" not in text, text
        field = f"{calc} input[name='{name}']"
        assert page.get_attribute(field, "aria-invalid") == "true"
        message = page.inner_text("#" + page.get_attribute(field, "aria-describedby"))
        assert beside in message, message
        page.fill(field, str(defaults[name]))
        assert page.get_attribute(field, "aria-invalid") is None
        check_numbers(page, calc, defaults)
    set_config(page, calc, configs[0])
    page.click(f"{calc} button[type='reset']")
    page.wait_for_function(f"document.querySelector(\"{calc}\").dataset.cacheBytes === '{shown[0]['cache']}'")
    check_numbers(page, calc, defaults)
    return shown


def check_fits_phone(page, calc: str) -> None:
    """At 390 px the calculator stays inside the screen and every control is at least 44 px tall (a finger)."""
    right, inner, outer = page.evaluate(f"""(() => {{ const c = document.querySelector("{calc}");
        return [c.getBoundingClientRect().right, c.scrollWidth, c.clientWidth]; }})()""")
    assert right <= 390 and inner <= outer, f"390 像素宽时计算器右缘在 {right} 像素，内容宽 {inner}，框宽 {outer}"
    heights = page.evaluate(f"""Array.from(document.querySelectorAll("{calc} input, {calc} select, {calc} button"))
                                .map(e => e.getBoundingClientRect().height)""")
    assert len(heights) == 8 and min(heights) >= 44, heights


@pytest.mark.browser
def test_numbers_in_chromium_match_attnlib(built):
    import jupyter_servers

    with jupyter_servers.chromium() as page:
        errors = []
        page.on("pageerror", lambda e: errors.append(e.stack or str(e)))
        page.goto((built / "index.html").as_uri())
        check_calculator(page, "#kvcalc-index-0", CH11, CONFIGS)
        check_calculator(page, "#kvcalc-index-1", CH16, CONFIGS[:2])
        assert not errors, errors


@pytest.mark.browser
def test_calculator_fits_a_phone(built):
    import jupyter_servers

    with jupyter_servers.chromium(viewport=(390, 844)) as page:
        page.goto((built / "index.html").as_uri())
        page.wait_for_selector(".kvcalc.kvcalc-ready")
        width = page.evaluate("document.documentElement.scrollWidth")
        assert width <= 390, f"390 像素宽时页面宽 {width} 像素"
        check_fits_phone(page, "#kvcalc-index-0")
        page.fill("#kvcalc-index-0 input[name='kv-heads']", "5")  # a long message must wrap, too
        check_fits_phone(page, "#kvcalc-index-0")
