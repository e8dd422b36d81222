# wrong: the slot counted from 1: token t goes to slot t % B + 1
# caught by: test_block_slot
# severity: essential
# diagnosis: 槽号多了 1
# %% block_slot
def block_slot(table, t, block_size):
    if not 0 <= t < len(table) * block_size:
        raise ValueError("t out of range")
    return table[t // block_size], t % block_size + 1
