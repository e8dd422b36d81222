# wrong: a draft is accepted whenever p > q, without the uniform number: no randomness in the acceptance
# caught by: test_accept_step
# severity: essential
# diagnosis: 草稿只在 p > q 时被接受，没有用随机数 u
# %% accept_step
def accept_step(p, q, draft, u):
    for i, d in enumerate(draft):
        if not p[i, d] > q[i, d]:  # 应是 u < p/q
            rest = np.maximum(p[i] - q[i], 0.0)
            return i, rest / rest.sum()
    return len(draft), p[len(draft)]
