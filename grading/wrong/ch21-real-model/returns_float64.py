# wrong: the weights are right but returned as float64 (the exercise asks for float32)
# caught by: test_dequantize_q4_1_block
# severity: edge
# diagnosis: 返回形状为 (32,) 的 float32 数组
# %% dequantize_q4_1_block
def dequantize_q4_1_block(block):
    block = np.asarray(block)
    if block.shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = block[:4].view("<f2").astype(np.float64)
    packed = block[4:]
    codes = np.concatenate([packed & 0x0F, packed >> 4]).astype(np.float64)
    return d * codes + m
