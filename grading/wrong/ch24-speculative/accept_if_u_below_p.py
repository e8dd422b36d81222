# wrong: the draft is accepted when u < p(d), the target's probability alone, not the ratio p(d) / q(d)
# caught by: test_accept_step
# severity: essential
# diagnosis: 精确算出的第一个词元的分布等于 p[0]：未通过
# %% accept_step
def accept_step(p, q, draft, u):
    for i, d in enumerate(draft):
        if not u[i] < p[i, d]:  # 应是 u < p/q
            rest = np.maximum(p[i] - q[i], 0.0)
            return i, rest / rest.sum()
    return len(draft), p[len(draft)]
