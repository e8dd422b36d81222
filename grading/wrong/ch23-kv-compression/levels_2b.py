# wrong: the scale divides the range by 2^b (one level too many: the largest number's code is 2^b)
# caught by: test_quantize
# severity: essential
# diagnosis: 步长除以了 2^b
# %% quantize
def quantize(x, bits, group_size):
    x = np.asarray(x)
    if x.shape[-1] % group_size:
        raise ValueError("d 不是 group_size 的整数倍")
    groups = x.reshape(*x.shape[:-1], -1, group_size)
    minimum = groups.min(-1)
    scale = (groups.max(-1) - minimum) / 2**bits
    safe = np.where(scale > 0, scale, 1)
    codes = np.rint((groups - minimum[..., None]) / safe[..., None])
    return codes.reshape(x.shape), scale, minimum


def dequantize(codes, scale, minimum, group_size):
    codes = np.asarray(codes)
    groups = codes.reshape(*codes.shape[:-1], -1, group_size)
    return (groups * scale[..., None] + minimum[..., None]).reshape(codes.shape)
