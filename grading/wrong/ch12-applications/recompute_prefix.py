# wrong: right tokens without a cache: every step embeds and projects the whole prefix again (what the cache is
# there to avoid); the tokens match, the count of embedded tokens per step does not
# caught by: test_greedy_decode
# severity: essential
# diagnosis: 整个前缀重新送进了 model.embed
# %% greedy_decode
def greedy_decode(model, source, n_new):
    memory = model.encode(source)
    k_mem, v_mem = memory @ model.c_k, memory @ model.c_v
    tokens = [model.bos]
    for _ in range(n_new):
        x = model.embed(tokens, 0)  # 整个前缀
        n = len(tokens)
        q, k, v = x @ model.w_q, x @ model.w_k, x @ model.w_v
        allowed = np.tril(np.ones((n, n), dtype=bool))
        y = x + anp.softmax(q @ k.T / np.sqrt(model.d), mask=allowed) @ v @ model.w_o
        y = y + anp.softmax((y @ model.c_q) @ k_mem.T / np.sqrt(model.d)) @ v_mem @ model.c_o
        tokens.append(int(np.argmax(model.read_out(y)[-1])))
    return np.array(tokens[1:], dtype=int)
