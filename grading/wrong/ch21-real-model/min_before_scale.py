# wrong: the minimum is added to the codes before the scale multiplies them, d·(q + m) instead of d·q + m
# caught by: test_dequantize_q4_1_block
# severity: essential
# diagnosis: 先加最小值再乘步长
# %% dequantize_q4_1_block
def dequantize_q4_1_block(block):
    block = np.asarray(block)
    if block.shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = block[:4].view("<f2").astype(np.float32)
    packed = block[4:]
    codes = np.concatenate([packed & 0x0F, packed >> 4]).astype(np.float32)
    return d * (codes + m)
