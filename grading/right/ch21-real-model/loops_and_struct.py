# right: struct.unpack for the two float16 numbers, a Python loop over the 16 bytes; RMSNorm with np.einsum;
# the sub-layer head by head with a hand-written RoPE (adjacent pairs), its own softmax and a loop over queries;
# the induction score with a loop over the second pass
# %% dequantize_q4_1_block
import struct


def dequantize_q4_1_block(block):
    data = bytes(np.asarray(block, dtype=np.uint8))
    if np.asarray(block).shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = struct.unpack("<ee", data[:4])
    out = np.zeros(32, dtype=np.float32)
    for j, byte in enumerate(data[4:]):
        out[j] = np.float32(d) * np.float32(byte & 0x0F) + np.float32(m)
        out[j + 16] = np.float32(d) * np.float32(byte >> 4) + np.float32(m)
    return out
# %% rms_norm
def rms_norm(x, weight, eps):
    x, weight = np.asarray(x), np.asarray(weight)
    if len(weight) != x.shape[-1] or weight.ndim != 1:
        raise ValueError("weight 的长度应等于 x 的最后一维")
    mean_square = np.einsum("...j,...j->...", x, x)[..., None] / x.shape[-1]
    return x * (1 / np.sqrt(mean_square + eps)) * weight
# %% attention_sublayer
def attention_sublayer(x, w, n_heads, n_kv_heads, rope_base, eps):
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[0]
    d_head = w["attn_q"].shape[0] // n_heads
    h = rms_norm(x, np.asarray(w["attn_norm"], dtype=np.float64), eps)
    q_all, k_all, v_all = (h @ np.asarray(w[name], dtype=np.float64).T for name in ("attn_q", "attn_k", "attn_v"))
    rates = rope_base ** (-np.arange(0, d_head, 2) / d_head)

    def rope(row, position):  # 相邻两维 (2i, 2i+1) 转过 position · rates[i]
        even, odd = row[0::2], row[1::2]
        cos, sin = np.cos(position * rates), np.sin(position * rates)
        out = np.empty_like(row)
        out[0::2], out[1::2] = even * cos - odd * sin, even * sin + odd * cos
        return out

    heads = []
    for i in range(n_heads):
        j = i // (n_heads // n_kv_heads)
        q = np.array([rope(q_all[t, i * d_head:(i + 1) * d_head], t) for t in range(n)])
        k = np.array([rope(k_all[t, j * d_head:(j + 1) * d_head], t) for t in range(n)])
        v = v_all[:, j * d_head:(j + 1) * d_head]
        out = np.zeros((n, d_head))
        for t in range(n):
            s = k[:t + 1] @ q[t] / np.sqrt(d_head)
            p = np.exp(s - s.max())
            out[t] = (p / p.sum()) @ v[:t + 1]
        heads.append(out)
    return np.concatenate(heads, axis=1) @ np.asarray(w["attn_output"], dtype=np.float64).T
# %% induction_scores
def induction_scores(weights, period):
    weights = np.asarray(weights)
    n = weights.shape[-1]
    if period < 1 or period >= n:
        raise ValueError("period 应在 1 到 n - 1 之间")
    total = np.zeros(weights.shape[:-2])
    for t in range(period, n):
        total = total + weights[..., t, t - period + 1]
    return total / (n - period)
