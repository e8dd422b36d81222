# wrong: the autograd.Function saves the n_q x n_k weights for backward (right gradients, autograd's memory)
# caught by: test_attention_function
# severity: essential
# diagnosis: 那是 n_q × n_k 的权重
# %% attention_function
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        p = torch.softmax(q @ k.mT / math.sqrt(q.shape[-1]), dim=-1)
        out = p @ v
        ctx.save_for_backward(q, k, v, out, p)
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, p = ctx.saved_tensors
        scale = 1.0 / math.sqrt(q.shape[-1])
        ds = p * (d_out @ v.mT - (d_out * out).sum(dim=-1, keepdim=True))
        return ds @ k * scale, ds.mT @ q * scale, p.mT @ d_out
