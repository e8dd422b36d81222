# wrong: block counts rounded down: the last, partly filled block of each request is not counted
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 块数用了下取整
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    shared = prefix_len // block_size
    return shared + sum((n - shared * block_size) // block_size for n in lengths)
