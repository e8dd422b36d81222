# wrong: multiplies the scores by the temperature instead of dividing (T=1 still looks right)
# caught by: test_softmax_temperature
# severity: essential
# diagnosis: 而不是乘上去
# %% softmax_temperature
def softmax_temperature(x, temperature, axis=-1):
    if not temperature > 0:
        raise ValueError("temperature 必须大于 0")
    return softmax_stable(np.asarray(x, dtype=float) * temperature, axis=axis)
