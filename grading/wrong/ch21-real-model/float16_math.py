# wrong: d and m are read as float16 and d·q + m is computed in float16 before the cast to float32 (the nibble order
# and the formula are right; only the rounding of float16 remains)
# caught by: test_dequantize_q4_1_block
# severity: edge
# diagnosis: 乘法和加法是在 float16 里算的
# %% dequantize_q4_1_block
def dequantize_q4_1_block(block):
    block = np.asarray(block)
    if block.shape != (20,):
        raise ValueError("一个 Q4_1 块是 20 个字节")
    d, m = block[:4].view("<f2")
    packed = block[4:]
    codes = np.concatenate([packed & 0x0F, packed >> 4])
    return (d * codes + m).astype(np.float32)
