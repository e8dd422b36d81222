# wrong: dequantize multiplies the codes by the scale and forgets to add the group's minimum back
# caught by: test_quantize
# severity: essential
# diagnosis: 还原时没有加回每组的最小值
# %% quantize
def quantize(x, bits, group_size):
    x = np.asarray(x)
    if x.shape[-1] % group_size:
        raise ValueError("d 不是 group_size 的整数倍")
    groups = x.reshape(*x.shape[:-1], -1, group_size)
    minimum = groups.min(-1)
    scale = (groups.max(-1) - minimum) / (2**bits - 1)
    safe = np.where(scale > 0, scale, 1)
    codes = np.rint((groups - minimum[..., None]) / safe[..., None])
    return codes.reshape(x.shape), scale, minimum


def dequantize(codes, scale, minimum, group_size):
    codes = np.asarray(codes)
    groups = codes.reshape(*codes.shape[:-1], -1, group_size)
    return (groups * scale[..., None]).reshape(codes.shape)
