# wrong: the right count, returned as a float (np.ceil gives float64): the exercise asks for an integer
# caught by: test_blocks_needed
# severity: edge
# diagnosis: 返回的是整数（int），不是浮点数：未通过
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    shared = prefix_len // block_size
    own = np.ceil((np.asarray(lengths) - shared * block_size) / block_size)
    return shared + own.sum()
