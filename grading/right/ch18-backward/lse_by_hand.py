# right: lse by hand (row maximum plus the log of the shifted sum), saved as (..., n_q); dtype follows the inputs
# %% attention_function
class AttentionFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v):
        s = (q / q.shape[-1] ** 0.5) @ k.transpose(-1, -2)
        m = s.amax(dim=-1, keepdim=True)
        lse = (m + torch.log(torch.exp(s - m).sum(dim=-1, keepdim=True))).squeeze(-1)  # (..., n_q)
        out = torch.exp(s - lse[..., None]) @ v
        ctx.save_for_backward(q, k, v, out, lse)
        return out

    @staticmethod
    def backward(ctx, d_out):
        q, k, v, out, lse = ctx.saved_tensors
        root = q.shape[-1] ** 0.5
        p = torch.exp((q / root) @ k.transpose(-1, -2) - lse[..., None])
        dp = d_out @ v.transpose(-1, -2)
        ds = p * (dp - torch.einsum("...ie,...ie->...i", d_out, out)[..., None])
        return ds @ k / root, ds.transpose(-1, -2) @ q / root, p.transpose(-1, -2) @ d_out
