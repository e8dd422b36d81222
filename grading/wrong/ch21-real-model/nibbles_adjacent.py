# wrong: the two codes of a byte are taken as neighbouring weights (byte j -> weights 2j, 2j+1), not j and j + 16
# caught by: test_dequantize_q4_1_block
# severity: essential
# diagnosis: 把一个字节的两个编码当成了相邻的两个权重
# %% dequantize_q4_1_block
def dequantize_q4_1_block(block):
    block = np.asarray(block)
    if block.shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = block[:4].view("<f2").astype(np.float32)
    packed = block[4:]
    codes = np.stack([packed & 0x0F, packed >> 4], axis=1).ravel().astype(np.float32)
    return d * codes + m
