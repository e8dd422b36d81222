# wrong: returns the attention weights as the effect of removing each token
# caught by: test_occlusion_effect
# severity: essential
# diagnosis: 返回的是注意力权重
# %% occlusion_effect
def occlusion_effect(q, k, v):
    _, w = anp.scaled_dot_product_attention(np.asarray(q, dtype=float)[None, :], k, v)
    return w[0]
