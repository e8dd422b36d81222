# wrong: the logical block index t // B returned instead of the physical block the table names
# caught by: test_block_slot
# severity: essential
# diagnosis: 不是物理块编号
# %% block_slot
def block_slot(table, t, block_size):
    if not 0 <= t < len(table) * block_size:
        raise ValueError("t out of range")
    return t // block_size, t % block_size
