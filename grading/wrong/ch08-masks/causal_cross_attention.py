# wrong: a causal mask in cross-attention: the decoder may read the whole source sentence, not only its first positions
# caught by: test_cross_attention
# severity: essential
# diagnosis: 交叉注意力不需要因果掩码
# %% cross_attention
def cross_attention(x_dec, memory, memory_lengths, w_q, w_k, w_v):
    x_dec, memory = np.asarray(x_dec, dtype=float), np.asarray(memory, dtype=float)
    q, k, v = x_dec @ w_q, memory @ w_k, memory @ w_v
    return masked_attention(q, k, v, mask=padding_mask(memory_lengths, memory.shape[-2]), causal=True)
