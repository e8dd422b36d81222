# wrong: after a rejection the next token is drawn from p instead of the residual max(0, p - q)
# caught by: test_accept_step
# severity: essential
# diagnosis: 被拒绝以后从 p 重新抽取
# %% accept_step
def accept_step(p, q, draft, u):
    for i, d in enumerate(draft):
        if u[i] * q[i, d] >= p[i, d]:
            return i, p[i]  # 应是 max(0, p - q) 归一化
    return len(draft), p[len(draft)]
