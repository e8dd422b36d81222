# wrong: right places, but a position past the table is not refused (Python's negative indexing answers t = -1)
# caught by: test_block_slot
# severity: edge
# diagnosis: 抛出 ValueError
# %% block_slot
def block_slot(table, t, block_size):
    return table[t // block_size] if t < len(table) * block_size else -1, t % block_size
