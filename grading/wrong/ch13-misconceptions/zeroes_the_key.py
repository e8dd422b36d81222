# wrong: "removes" token j by setting its key to zero: a zero score still gets a share of the weight
# caught by: test_occlusion_effect
# severity: essential
# diagnosis: 键置零不等于删去它
# %% occlusion_effect
def occlusion_effect(q, k, v):
    q = np.asarray(q, dtype=float)[None, :]
    k = np.asarray(k, dtype=float)
    full, _ = anp.scaled_dot_product_attention(q, k, v)
    effect = np.empty(len(k))
    for j in range(len(k)):
        removed = k.copy()
        removed[j] = 0.0
        without, _ = anp.scaled_dot_product_attention(q, removed, v)
        effect[j] = np.linalg.norm(full - without)
    return effect
