"""The book's self-check questions: the question files, the Sphinx directive, and a real click in Chromium.

A tiny Sphinx project (MyST, the offline MathJax, the selfcheck extension) is
built in a temporary directory with ``-W``; headless Chromium then opens the
page and is driven over the DevTools protocol: the mouse clicks an option the
way a reader would, and the page must show the feedback and the explanation.
"""

from __future__ import annotations

import json
import math
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np
import pytest
import websocket

from attnlib import numpy as anp
from conftest import provision

ROOT = pathlib.Path(__file__).resolve().parents[1]
EXT = ROOT / "book" / "_ext"
SETS = sorted((ROOT / "book" / "selfchecks").glob("*.yml"))

sys.path.insert(0, str(EXT))
import selfcheck  # noqa: E402  (the extension module itself)

sys.path.remove(str(EXT))


# --------------------------------------------------------------------------- question files

def test_every_set_is_valid_and_small():
    assert {p.stem for p in SETS} >= {"ch05-softmax", "ch13-misconceptions"}
    for path in SETS:
        data = selfcheck.load_questions(path)
        assert 2 <= len(data["questions"]) <= 4, path
        for q in data["questions"]:
            assert all(o["why"].strip() for o in q["options"])


def test_sets_are_not_the_graded_questions():
    quiz_text = "".join(p.read_text(encoding="utf-8") for p in (ROOT / "solutions").glob("quiz-*/*.ipynb"))
    for path in SETS:
        for q in selfcheck.load_questions(path)["questions"]:
            assert q["question"] not in quiz_text


@pytest.mark.parametrize(("text", "fragment"), [
    ("questions: []", "非空 questions"),
    ("questions:\n  - question: 题\n    options:\n      - {text: a, why: b, correct: true}", "2 到"),
    ("questions:\n  - question: 题\n    options:\n      - {text: a, why: b}\n      - {text: c, why: d}", "恰好有一个"),
    ("questions:\n  - question: 题\n    multi: true\n    options:\n      - {text: a, why: b}\n"
     "      - {text: c, why: d}", "至少要有一个"),
    ("questions:\n  - question: 题\n    options:\n      - {text: a, correct: true}\n      - {text: c, why: d}",
     "text 和 why"),
    ("questions: [", "YAML"),
])
def test_bad_files_are_refused_in_chinese(tmp_path, text, fragment):
    path = tmp_path / "bad.yml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(selfcheck.QuestionFileError, match=fragment):
        selfcheck.load_questions(path)


def test_ch05_facts_hold():
    assert np.allclose(anp.softmax(np.array([1.0, 2, 3])), anp.softmax(np.array([101.0, 102, 103])))
    x = np.array([1.0, 2, 3])
    assert np.ptp(anp.softmax(x, temperature=10)) < np.ptp(anp.softmax(x)) < np.ptp(anp.softmax(x, temperature=0.1))
    mask = np.array([True, False, True, False])
    w = anp.softmax(np.array([1.0, 50.0, 2.0, -3.0]), mask=mask)
    assert w[1] == 0 and w[3] == 0 and math.isclose(w.sum(), 1)
    w2 = anp.softmax(np.array([1.0, -50.0, 2.0, 9.0]), mask=mask)
    assert np.array_equal(w, w2)
    assert np.array_equal(anp.softmax(np.array([1.0, 2.0]), mask=np.array([False, False])), np.zeros(2))


def test_ch05_torch_is_not_uniform_about_fully_masked_rows():
    """Question 3, option C: F.sdpa gives 0, F.softmax and nn.MultiheadAttention's weights give NaN."""
    import torch
    import torch.nn.functional as F

    q = k = v = torch.randn(1, 1, 2, 4)
    blocked = torch.tensor([[True, True], [False, False]])  # True = may attend; row 1 fully masked
    assert (F.scaled_dot_product_attention(q, k, v, attn_mask=blocked)[0, 0, 1] == 0).all()
    assert torch.isnan(F.softmax(torch.full((3,), float("-inf")), dim=0)).all()
    mha = torch.nn.MultiheadAttention(4, 1, batch_first=True)
    with torch.no_grad():
        _, weights = mha(q[0], k[0], v[0], attn_mask=~blocked)  # its attn_mask: True = may NOT attend
    assert torch.isnan(weights[0, 1]).all() and not torch.isnan(weights[0, 0]).any()


def test_ch13_facts_hold():
    q, keys = np.array([[1.0, 0.0]]), np.array([[1.0, 0.0], [3.0, 3.0]])
    dots = anp.attention_scores(q, keys, scale=False)[0]
    cos = dots / (np.linalg.norm(q) * np.linalg.norm(keys, axis=1))
    assert dots.argmax() == 1 and cos.argmax() == 0 and abs(cos[1] - 0.71) < 0.01
    w = anp.softmax(np.array([0.83, 0.05]))
    assert np.allclose(w, [0.69, 0.31], atol=0.005) and 2.1 < w[0] / w[1] < 2.3
    assert np.isclose(w[0] / w[1], np.exp(0.78))
    # question 3, option B: removing token j changes the output by alpha_j (v_j - mean of the others)
    rng = np.random.default_rng(0)
    q, k, v = rng.normal(size=(1, 3)), rng.normal(size=(5, 3)), rng.normal(size=(5, 2))
    out, weights = anp.scaled_dot_product_attention(q, k, v)
    for j in range(5):
        keep = np.arange(5) != j
        without, _ = anp.scaled_dot_product_attention(q, k, v, mask=keep)
        assert np.allclose(out - without, weights[0, j] * (v[j] - without))


# --------------------------------------------------------------------------- the directive in a real build

PAGE = """# 自测页面

正文。

```{selfcheck} selfchecks/ch05-softmax.yml
```

```{selfcheck} /selfchecks/ch13-misconceptions.yml
```
"""

CONF = f"""
import sys
sys.path.insert(0, {str(EXT)!r})
project = "selfcheck test"
language = "zh_CN"
extensions = ["myst_parser", "sphinx-mathjax-offline", "selfcheck"]
myst_enable_extensions = ["dollarmath"]
html_theme = "basic"
"""


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> pathlib.Path:
    src = tmp_path_factory.mktemp("selfcheck-src")
    (src / "conf.py").write_text(CONF, encoding="utf-8")
    (src / "index.md").write_text(PAGE, encoding="utf-8")
    shutil.copytree(ROOT / "book" / "selfchecks", src / "selfchecks")
    out = src / "_build"
    command = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html", str(src), str(out)]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return out


def test_directive_renders_questions_and_assets(built):
    html = (built / "index.html").read_text(encoding="utf-8")
    n_questions = sum(len(selfcheck.load_questions(p)["questions"]) for p in SETS if p.stem in
                      {"ch05-softmax", "ch13-misconceptions"})
    assert html.count('class="selfcheck-question"') == n_questions
    assert html.count('data-multi="true"') == 2
    assert "自测：Softmax 归一化" in html and "自测：常见误区" in html
    assert 'class="math' in html  # $...$ in a question became MathJax math
    assert (built / "_static" / "selfcheck.js").is_file() and (built / "_static" / "selfcheck.css").is_file()
    assert re.search(r'<script[^>]+src="_static/selfcheck\.js', html)


def test_page_needs_no_network(built):
    html = (built / "index.html").read_text(encoding="utf-8")
    for tag in re.findall(r"<(?:script|link|img)\b[^>]*>", html):
        assert not re.search(r'(?:src|href)="(?:https?:)?//', tag), tag
    for asset in ("selfcheck.js", "selfcheck.css"):
        assert "http" not in (built / "_static" / asset).read_text(encoding="utf-8")


def test_bad_file_fails_the_build(tmp_path):
    (tmp_path / "conf.py").write_text(CONF, encoding="utf-8")
    (tmp_path / "index.md").write_text("# 页\n\n```{selfcheck} missing.yml\n```\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(tmp_path),
                           str(tmp_path / "_build")], capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode != 0 and "读不到自测题文件" in proc.stderr


# --------------------------------------------------------------------------- a real click in Chromium

class Browser:
    """Headless Chromium driven over the DevTools protocol (one page)."""

    def __init__(self):
        exe = provision.find_chromium()
        self.profile = tempfile.mkdtemp(prefix="chromium-selfcheck-")
        self.proc = subprocess.Popen(
            [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
             "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-extensions",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "--remote-allow-origins=*",
             "--window-size=1200,900", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        port_file = pathlib.Path(self.profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not (port_file.exists() and port_file.read_text().strip()):
            if time.monotonic() > deadline or self.proc.poll() is not None:
                self.close()
                pytest.fail("Chromium 没有打开调试端口 (no DevTools port)")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/json/list", timeout=10) as resp:
            targets = [t for t in json.load(resp) if t["type"] == "page"]
        self.ws = websocket.create_connection(targets[0]["webSocketDebuggerUrl"], timeout=30, suppress_origin=True)
        self.next_id = 0

    def send(self, method: str, **params) -> dict:
        self.next_id += 1
        self.ws.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == self.next_id:
                assert "error" not in msg, msg
                return msg.get("result", {})

    def eval(self, expression: str):
        result = self.send("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, result
        return result["result"].get("value")

    def wait_for(self, expression: str, timeout: float = 30):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.eval(expression):
                return
            time.sleep(0.1)
        raise AssertionError(f"timed out waiting for {expression}")

    def click(self, element: str) -> None:
        """Scroll the element (a JS expression) into view and press the left mouse button at its centre."""
        box = self.eval(f"""(() => {{ const e = {element};
            e.scrollIntoView({{block: "center"}}); const r = e.getBoundingClientRect();
            return [r.left + r.width / 2, r.top + r.height / 2]; }})()""")
        x, y = box
        for kind in ("mouseMoved", "mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", type=kind, x=x, y=y, button="left", clickCount=1)

    def close(self):
        if getattr(self, "ws", None) is not None:
            self.ws.close()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        shutil.rmtree(self.profile, ignore_errors=True)


@pytest.fixture()
def page(built):
    browser = Browser()
    try:
        browser.send("Page.enable")
        browser.send("Page.navigate", url=(built / "index.html").as_uri())
        browser.wait_for("document.readyState === 'complete' && "
                         "document.querySelectorAll('.selfcheck-question.selfcheck-ready').length > 0")
        yield browser
    finally:
        browser.close()


Q1 = ".selfcheck-question[data-number='1']"
FEEDBACK = f"document.querySelector(\"{Q1} .selfcheck-feedback\").textContent"


def option(question: str, index: int) -> str:
    """JS expression for option ``index`` (0-based) of the first question matching ``question``."""
    return f"document.querySelector(\"{question}\").querySelectorAll('.selfcheck-option')[{index}]"


@pytest.mark.browser
def test_clicking_a_wrong_then_the_right_option(page):
    assert page.eval(FEEDBACK) == ""
    assert page.eval(f"document.querySelector(\"{Q1} .selfcheck-why\").hidden") is True
    page.click(option(Q1, 1))  # B: wrong
    page.wait_for(f"{FEEDBACK}.length > 0")
    assert page.eval(FEEDBACK).startswith("✗ B 不对")
    shown = page.eval(f"""Array.from(document.querySelectorAll("{Q1} .selfcheck-why"))
                          .filter(e => !e.hidden).map(e => e.textContent)""")
    assert len(shown) == 1 and "分数之间的差" in shown[0]
    page.click(option(Q1, 0))  # A: right
    page.wait_for(f"{FEEDBACK}.startsWith('✓')")
    assert page.eval(f"document.querySelectorAll(\"{Q1} .selfcheck-why:not([hidden])\").length") == 4
    assert page.eval(f"document.querySelector(\"{Q1} .selfcheck-option\").classList.contains('selfcheck-right')")


@pytest.mark.browser
def test_multi_select_checks_on_the_button(page):
    q3 = ".selfcheck-question[data-number='3']"
    fb = f"document.querySelector(\"{q3} .selfcheck-feedback\").textContent"
    page.click(option(q3, 0))
    page.click(option(q3, 3))
    assert page.eval(fb) == ""  # toggling alone gives no verdict
    page.click(f"document.querySelector(\"{q3} .selfcheck-check\")")
    page.wait_for(f"{fb}.length > 0")
    text = page.eval(fb)
    assert "漏选了 BC" in text and "多选了 D" in text
