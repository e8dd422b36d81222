# wrong: the block index off by one at a block boundary: (t + 1) // B (the last token of a block goes to the next)
# caught by: test_block_slot
# severity: essential
# diagnosis: 块边界上差一
# %% block_slot
def block_slot(table, t, block_size):
    if not 0 <= t < len(table) * block_size:
        raise ValueError("t out of range")
    return table[min((t + 1) // block_size, len(table) - 1)], t % block_size
