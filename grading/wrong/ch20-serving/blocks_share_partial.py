# wrong: the prefix's partial last block counted as shared too (no copy-on-write): the children would write into it
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 把前缀半满的最后一块也当成共用的
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    shared = -(-prefix_len // block_size)
    return shared + sum(max(0, -(-(n - shared * block_size) // block_size)) for n in lengths)
