# wrong: the residual max(0, p - q) is returned without dividing by its sum
# caught by: test_accept_step
# severity: essential
# diagnosis: 剩余分布 max(0, p − q) 没有归一化
# %% accept_step
def accept_step(p, q, draft, u):
    for i, d in enumerate(draft):
        if u[i] * q[i, d] >= p[i, d]:
            return i, np.maximum(p[i] - q[i], 0.0)
    return len(draft), p[len(draft)]
