# wrong: the flattened tree gets the ordinary causal mask: every earlier node, other branches included, is visible
# caught by: test_tree_mask
# severity: essential
# diagnosis: 用了普通的因果掩码
# %% tree_mask_and_positions
def tree_mask_and_positions(parents, start):
    n = len(parents)
    depth = np.zeros(n, dtype=int)
    for i, parent in enumerate(parents):
        if parent >= 0:
            depth[i] = depth[parent] + 1
    return np.tril(np.ones((n, n), dtype=bool)), start + depth
