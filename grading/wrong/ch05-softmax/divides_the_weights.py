# wrong: divides the softmax weights by the temperature instead of the scores: the weights sum to 1/T
# caught by: test_softmax_temperature
# severity: essential
# diagnosis: 权重之和等于 1/T
# %% softmax_temperature
def softmax_temperature(x, temperature, axis=-1):
    if not temperature > 0:
        raise ValueError("temperature 必须大于 0")
    return softmax_stable(x, axis=axis) / temperature
