# wrong: the bytes count the packed codes only, not each group's float16 scale and minimum
# caught by: test_kivi
# severity: essential
# diagnosis: 只算了编码
# %% kivi
def kivi_roundtrip(keys, values, bits, group_size):
    by_channel = np.swapaxes(keys, -1, -2)
    keys_hat = np.swapaxes(dequantize(*quantize(by_channel, bits, group_size), group_size), -1, -2)
    values_hat = dequantize(*quantize(values, bits, group_size), group_size)
    return keys_hat, values_hat


def compressed_bytes(n_layers, n_kv_heads, n_tokens, d_head, bits, group_size):
    numbers = 2 * n_layers * n_kv_heads * n_tokens * d_head
    return numbers * bits // 8
