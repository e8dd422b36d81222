# wrong: the high halves are read as weights 0..15 and the low halves as 16..31
# caught by: test_dequantize_q4_1_block
# severity: essential
# diagnosis: 高低两半弄反了
# %% dequantize_q4_1_block
def dequantize_q4_1_block(block):
    block = np.asarray(block)
    if block.shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = block[:4].view("<f2").astype(np.float32)
    packed = block[4:]
    codes = np.concatenate([packed >> 4, packed & 0x0F]).astype(np.float32)
    return d * codes + m
