# wrong: the keys are quantized per token (groups of channels), like the values, instead of per channel
# caught by: test_kivi
# severity: essential
# diagnosis: 键按词元量化了
# %% kivi
def kivi_roundtrip(keys, values, bits, group_size):
    keys_hat = dequantize(*quantize(keys, bits, group_size), group_size)
    values_hat = dequantize(*quantize(values, bits, group_size), group_size)
    return keys_hat, values_hat


def compressed_bytes(n_layers, n_kv_heads, n_tokens, d_head, bits, group_size):
    numbers = 2 * n_layers * n_kv_heads * n_tokens * d_head
    return numbers * bits // 8 + numbers // group_size * 4
