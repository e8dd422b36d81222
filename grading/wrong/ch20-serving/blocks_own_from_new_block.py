# wrong: each request's own tokens start a fresh block, the copied partial block of the prefix is not counted
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 复制的半满块没算
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    return -(-prefix_len // block_size) + sum(-(-(n - prefix_len) // block_size) for n in lengths)
