# wrong: after a copy-on-write, the original block's count is set to 1 instead of lowered by 1, as if only two
# sequences could share it: with three sharers, the third writes into the block the parent still uses
# caught by: test_block_pool
# severity: essential
# diagnosis: 写时复制以后把原块的引用计数设成了 1
# %% block_pool
class BlockPool:
    """带引用计数的块池：块表、fork、写时复制的 append 和 free。

    参数
    ----
    n_blocks : int
        物理块的个数。
    block_size : int
        每块的词元数 B。
    """

    def __init__(self, n_blocks, block_size):
        self.block_size = block_size
        self.data = np.zeros((n_blocks, block_size))  # (n_blocks, B)：每个物理块的 B 个槽
        self.refs = [0] * n_blocks  # 每个块被几个块表用到
        self.free_list = list(range(n_blocks))  # 空闲的块：从前面取，放回到末尾
        self.tables = {}  # 序列编号 -> 它的块表（物理块编号，按词元的顺序）
        self.lengths = {}  # 序列编号 -> 它存了几个词元
        self.next_id = 0

    def allocate(self):
        """新建一个空序列，返回它的编号（编号不重复使用）。"""
        seq, self.next_id = self.next_id, self.next_id + 1
        self.tables[seq], self.lengths[seq] = [], 0
        return seq

    def _take(self):
        """从空闲列表取一个块，它的引用计数设为 1。"""
        if not self.free_list:
            raise ValueError("块池里没有空闲的块了")
        block = self.free_list.pop(0)
        self.refs[block] = 1
        return block

    def read(self, seq):
        """序列的全部值，按块表读出：一个长度为 lengths[seq] 的 list。"""
        n, size = self.lengths[seq], self.block_size
        return [float(self.data[self.tables[seq][t // size], t % size]) for t in range(n)]

    def block_table(self, seq):
        """seq 的块表：物理块编号的列表（一份拷贝）。"""
        return list(self.tables[seq])

    def n_free(self):
        """空闲块的个数。"""
        return len(self.free_list)

    def fork(self, seq):
        """新序列，共用 seq 的全部块；返回它的编号。"""
        child = self.allocate()
        self.tables[child], self.lengths[child] = list(self.tables[seq]), self.lengths[seq]
        for block in self.tables[seq]:
            self.refs[block] += 1  # 多了一个块表用它
        return child

    def append(self, seq, values):
        """把 values 逐个写到序列 seq 的末尾：满了取新块，共用的半满块先复制。"""
        table, size = self.tables[seq], self.block_size
        for x in values:
            slot = self.lengths[seq] % size
            if slot == 0:  # 最后一块满了，或者还没有块
                table.append(self._take())
            elif self.refs[table[-1]] > 1:  # 别人也在用的半满块：写时复制
                private = self._take()
                self.data[private] = self.data[table[-1]]
                self.refs[table[-1]] = 1  # the other sequence is now the only one using it
                table[-1] = private
            self.data[table[-1], slot] = x
            self.lengths[seq] += 1

    def free(self, seq):
        """删掉序列 seq：它的块引用计数减 1，减到 0 的放回空闲列表。"""
        for block in self.tables.pop(seq):
            self.refs[block] -= 1
            if self.refs[block] == 0:  # 没有块表再用它了
                self.free_list.append(block)
        del self.lengths[seq]
