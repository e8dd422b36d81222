# wrong: "the new token's query is matched against the cached keys": each step attends to the cache as it was, then
# appends the new key and value, so the new token never sees its own key (the first step, with nothing cached, falls
# back to the token alone); an untrained model often writes the same tokens anyway
# caught by: test_greedy_decode
# severity: essential
# diagnosis: 没有看到新词元自己的键
# %% greedy_decode
def greedy_decode(model, source, n_new):
    memory = model.encode(source)
    k_mem, v_mem = memory @ model.c_k, memory @ model.c_v
    keys, values = [], []
    token, out = model.bos, []
    for t in range(n_new):
        x = model.embed([token], t)
        q, k, v = x @ model.w_q, x @ model.w_k, x @ model.w_v
        if keys:
            K, V = np.concatenate(keys), np.concatenate(values)
            a = anp.softmax(q @ K.T / np.sqrt(model.d)) @ V
        else:
            a = v  # 缓存还是空的：只有它自己
        keys.append(k)
        values.append(v)
        y = x + a @ model.w_o
        y = y + anp.softmax((y @ model.c_q) @ k_mem.T / np.sqrt(model.d)) @ v_mem @ model.c_o
        token = int(np.argmax(model.read_out(y)[-1]))
        out.append(token)
    return np.array(out, dtype=int)
