# right: greedy decoding with a preallocated (n_new, d) key and value buffer, its own softmax, and the read-out
# called on a one-dimensional row
# %% greedy_decode
def greedy_decode(model, source, n_new):
    def softmax(s):
        e = np.exp(s - s.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    memory = model.encode(source)
    k_mem, v_mem = memory @ model.c_k, memory @ model.c_v
    K = np.zeros((n_new, model.d))
    V = np.zeros((n_new, model.d))
    written = np.zeros(n_new, dtype=np.int64)
    token = model.bos
    for t in range(n_new):
        x = model.embed([token], t)[0]  # (d,)
        q = x @ model.w_q
        K[t], V[t] = x @ model.w_k, x @ model.w_v
        a = softmax(K[:t + 1] @ q / np.sqrt(model.d)) @ V[:t + 1]
        y = x + a @ model.w_o
        c = softmax(k_mem @ (y @ model.c_q) / np.sqrt(model.d)) @ v_mem
        y = y + c @ model.c_o
        token = int(np.argmax(model.read_out(y)))
        written[t] = token
    return written
