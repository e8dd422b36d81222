# wrong: the positions are the flattened index, start + i, instead of start + depth
# caught by: test_tree_mask
# severity: essential
# diagnosis: 位置取了展平后的下标
# %% tree_mask_and_positions
def tree_mask_and_positions(parents, start):
    n = len(parents)
    mask = np.eye(n, dtype=bool)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]
    return mask, start + np.arange(n)
