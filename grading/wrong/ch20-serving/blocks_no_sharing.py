# wrong: the prefix stored once per request: no prefix sharing
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 前缀没有共享
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    return sum(-(-n // block_size) for n in lengths)
