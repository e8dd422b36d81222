# wrong: one minimum and one scale for the whole tensor instead of one per group
# caught by: test_quantize
# severity: essential
# diagnosis: 整个张量只用了一个最小值和一个步长
# %% quantize
def quantize(x, bits, group_size):
    x = np.asarray(x)
    if x.shape[-1] % group_size:
        raise ValueError("d 不是 group_size 的整数倍")
    m, s = x.min(), (x.max() - x.min()) / (2**bits - 1)
    shape = x.shape[:-1] + (x.shape[-1] // group_size,)
    codes = np.rint((x - m) / s) if s > 0 else np.zeros(x.shape)
    return codes, np.full(shape, s), np.full(shape, m)


def dequantize(codes, scale, minimum, group_size):
    codes = np.asarray(codes)
    groups = codes.reshape(*codes.shape[:-1], -1, group_size)
    return (groups * scale[..., None] + minimum[..., None]).reshape(codes.shape)
