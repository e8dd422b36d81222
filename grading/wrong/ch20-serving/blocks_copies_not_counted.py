# wrong: the prefix's partial last block forgotten altogether: only its full blocks are counted, and each request's
# own tokens start on new blocks (no copy of the partial block is counted either)
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 既没有算共用，也没有算每个请求复制的那一份
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    return prefix_len // block_size + sum(-(-(n - prefix_len) // block_size) for n in lengths)
