# wrong: every new token is embedded at position 0 (the position code restarts at each step), so the decoder
# cannot tell the steps apart and writes other tokens than decoding without a cache
# caught by: test_greedy_decode
# severity: essential
# diagnosis: 新词元的位置编码从 0 开始了
# %% greedy_decode
def greedy_decode(model, source, n_new):
    memory = model.encode(source)
    k_mem, v_mem = memory @ model.c_k, memory @ model.c_v
    keys, values = [], []
    token, out = model.bos, []
    for _ in range(n_new):
        x = model.embed([token], 0)
        q, k, v = x @ model.w_q, x @ model.w_k, x @ model.w_v
        keys.append(k)
        values.append(v)
        K, V = np.concatenate(keys), np.concatenate(values)
        y = x + anp.softmax(q @ K.T / np.sqrt(model.d)) @ V @ model.w_o
        y = y + anp.softmax((y @ model.c_q) @ k_mem.T / np.sqrt(model.d)) @ v_mem @ model.c_o
        token = int(np.argmax(model.read_out(y)[-1]))
        out.append(token)
    return np.array(out, dtype=int)
