# wrong: the prefix sequence is counted as if it were still held: its partial last block adds one block (the
# chapter's demonstration, which keeps the parent, counts 87 for 86 here)
# caught by: test_blocks_needed
# severity: essential
# diagnosis: 前缀序列自己的半满块也算进去了
# %% blocks_needed
def blocks_needed(lengths, block_size, prefix_len=0):
    if any(n <= prefix_len for n in lengths):
        raise ValueError("every request must be longer than the prefix")
    shared = prefix_len // block_size
    own = sum(-(-(n - shared * block_size) // block_size) for n in lengths)
    parent_partial = 1 if prefix_len % block_size else 0
    return shared + own + parent_partial
