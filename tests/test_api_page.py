"""The attnlib API page: generated from the docstrings, every public name, both backends, a chapter for each."""

from __future__ import annotations

import importlib
import sys
import types

import pytest
from lessons import ROOT
from sphinx.errors import ExtensionError

sys.path.insert(0, str(ROOT / "book" / "_ext"))
import apidoc  # noqa: E402  (the extension module itself)

sys.path.remove(str(ROOT / "book" / "_ext"))


def test_every_public_name_has_a_chapter_that_exists_and_a_docstring():
    names = apidoc.public_names()
    assert sorted(names) == sorted(importlib.import_module("attnlib.numpy").__all__)
    for name in names:
        assert (ROOT / "book" / f"{apidoc.CHAPTER_OF[name]}.md").is_file(), (name, apidoc.CHAPTER_OF[name])


def test_each_chapter_links_the_api_entries_of_the_functions_it_teaches():
    for name, chapter in apidoc.CHAPTER_OF.items():
        text = (ROOT / "book" / f"{chapter}.md").read_text(encoding="utf-8")
        assert f"attnlib.numpy.{name}" in text, f"{chapter} 应当链接它讲的 {name} 的 API 条目"


def test_entries_show_both_backends_side_by_side():
    myst = "\n".join(apidoc.entry("softmax"))
    assert ":::::{grid} 1 1 2 2" in myst and "{doc}`ch05-softmax`" in myst
    assert ".. autofunction:: attnlib.numpy.softmax" in myst and ".. autofunction:: attnlib.torch.softmax" in myst
    assert ":members:" in "\n".join(apidoc.entry("KVCache"))


def _fake_backends(monkeypatch, numpy_names, torch_names, doc="A docstring."):
    for path, names in (("attnlib.numpy", numpy_names), ("attnlib.torch", torch_names)):
        module = types.ModuleType(path)
        module.__all__ = list(names)
        for name in names:
            def func():
                pass
            func.__doc__ = doc
            setattr(module, name, func)
        monkeypatch.setitem(sys.modules, path, module)


@pytest.mark.parametrize(("numpy_names", "torch_names", "doc", "match"), [
    (["softmax"], ["softmax"], "", "没有文档字符串"),
    (["softmax"], ["softmax", "causal_mask"], "Doc.", "导出的名字不同"),
    (["softmax", "brand_new"], ["softmax", "brand_new"], "Doc.", "还没有登记"),
])
def test_the_build_fails_in_chinese_on_an_undocumented_or_unlisted_function(monkeypatch, numpy_names, torch_names,
                                                                            doc, match):
    monkeypatch.setattr(apidoc.importlib, "import_module", lambda path: sys.modules[path])
    _fake_backends(monkeypatch, numpy_names, torch_names, doc)
    with pytest.raises(ExtensionError, match=match):
        apidoc.public_names()
