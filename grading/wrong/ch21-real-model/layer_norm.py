# wrong: the mean is subtracted before dividing (layer normalization without its bias), not RMSNorm
# caught by: test_rms_norm
# severity: essential
# diagnosis: 先减去了均值（这是层归一化）
# %% rms_norm
def rms_norm(x, weight, eps):
    x, weight = np.asarray(x), np.asarray(weight)
    if weight.shape != x.shape[-1:]:
        raise ValueError("weight 的长度应等于 x 的最后一维")
    centred = x - x.mean(axis=-1, keepdims=True)
    return centred / np.sqrt(np.mean(centred * centred, axis=-1, keepdims=True) + eps) * weight
