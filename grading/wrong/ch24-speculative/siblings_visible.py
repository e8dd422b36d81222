# wrong: a node also sees its siblings (the nodes with the same parent), not only itself and its ancestors
# caught by: test_tree_mask
# severity: essential
# diagnosis: 兄弟节点（父节点相同的节点）也看得见了
# %% tree_mask_and_positions
def tree_mask_and_positions(parents, start):
    n = len(parents)
    mask = np.eye(n, dtype=bool)
    depth = np.zeros(n, dtype=int)
    for i, parent in enumerate(parents):
        if parent >= 0:
            mask[i] |= mask[parent]
            depth[i] = depth[parent] + 1
    same_parent = np.array(parents)[:, None] == np.array(parents)[None, :]
    return mask | same_parent, start + depth
