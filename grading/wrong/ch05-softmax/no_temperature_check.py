# wrong: never checks the temperature: T = 0 divides by zero and returns nan, a negative T flips the ranking
# caught by: test_softmax_temperature
# severity: edge
# diagnosis: 应当抛出 ValueError
# %% softmax_temperature
def softmax_temperature(x, temperature, axis=-1):
    return softmax_stable(np.asarray(x, dtype=float) / temperature, axis=axis)
