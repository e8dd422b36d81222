"""NumPy backend of attnlib: the readable reference (float64 by default, float32 honoured).

Every function here has a twin with the same name and signature in
``attnlib.torch``.
"""

from .attention import scaled_dot_product_attention
from .flash import flash_attention
from .masks import causal_mask, padding_mask, sliding_window_mask
from .multihead import merge_heads, multi_head_attention, split_heads
from .projection import qkv_projection
from .scores import attention_scores
from .softmax import softmax

__all__ = [
    "attention_scores", "causal_mask", "flash_attention", "merge_heads", "multi_head_attention", "padding_mask",
    "qkv_projection", "scaled_dot_product_attention", "sliding_window_mask", "softmax", "split_heads",
]
