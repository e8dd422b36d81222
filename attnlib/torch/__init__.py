"""PyTorch backend of attnlib: any device (CPU or CUDA), dtype and device taken from the inputs.

Every function here has a twin with the same name and signature in
``attnlib.numpy``.
"""

from .attention import scaled_dot_product_attention
from .delta import chunked_delta_rule, delta_rule
from .flash import flash_attention, flash_attention_backward
from .gqa import grouped_query_attention
from .kv_cache import KVCache, cached_attention
from .kv_compress import (
    QuantizedKV,
    compress_cache,
    dequantize_kv,
    h2o_keep,
    heavy_hitters,
    quantize_kv,
    quantized_nbytes,
    snapkv_keep,
)
from .linear import linear_attention
from .llama import LlamaModel, rms_norm
from .masks import causal_mask, padding_mask, sliding_window_mask
from .mla import LatentKVCache, latent_attention_step, multi_head_latent_attention
from .multihead import merge_heads, multi_head_attention, split_heads
from .paged import PagedKVCache, paged_attention
from .parallel import attention_loop, rnn_scan
from .positions import alibi_bias, apply_rope, sinusoidal_positions
from .projection import qkv_projection
from .scaling import dot_product_variance, sample_dot_products, softmax_grad_norm, weight_entropy
from .scores import attention_scores, cosine_scores
from .sinks import SinkKVCache, sink_attention, streaming_mask
from .softmax import softmax
from .sparse import lightning_indexer_scores, sliding_window_attention, topk_sparse_attention
from .speculative import (
    accept_drafts,
    early_exit,
    gather_path,
    residual_distribution,
    speculative_generate,
    tree_mask,
    tree_positions,
    verify_tree,
)

__all__ = [
    "attention_loop", "rnn_scan", "linear_attention", "sliding_window_attention", "KVCache", "cached_attention",
    "attention_scores", "causal_mask", "cosine_scores", "dot_product_variance", "flash_attention", "merge_heads",
    "multi_head_attention", "padding_mask", "qkv_projection", "sample_dot_products", "scaled_dot_product_attention",
    "sliding_window_mask", "softmax", "softmax_grad_norm", "split_heads", "weight_entropy",
    "alibi_bias", "apply_rope", "sinusoidal_positions",
    "grouped_query_attention",
    "multi_head_latent_attention", "LatentKVCache", "latent_attention_step",
    "flash_attention_backward",
    "delta_rule", "chunked_delta_rule",
    "PagedKVCache", "paged_attention", "topk_sparse_attention", "lightning_indexer_scores",
    "rms_norm", "LlamaModel",
    "sink_attention", "streaming_mask", "SinkKVCache",
    "quantize_kv", "dequantize_kv", "QuantizedKV", "quantized_nbytes", "heavy_hitters", "h2o_keep", "snapkv_keep",
    "compress_cache",
    "accept_drafts", "residual_distribution", "tree_mask", "tree_positions", "gather_path",
    "early_exit", "verify_tree", "speculative_generate",
]
