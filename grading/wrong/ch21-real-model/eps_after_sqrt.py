# wrong: eps is added after the square root, x / (sqrt(mean(x²)) + eps)
# caught by: test_rms_norm
# severity: edge
# diagnosis: eps 加在了开方之后
# %% rms_norm
def rms_norm(x, weight, eps):
    x, weight = np.asarray(x), np.asarray(weight)
    if weight.shape != x.shape[-1:]:
        raise ValueError("weight 的长度应等于 x 的最后一维")
    return x / (np.sqrt(np.mean(x * x, axis=-1, keepdims=True)) + eps) * weight
