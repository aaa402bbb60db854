

def test_one_constant_boolean_mask_read_by_two_attention_calls_is_one_weight():
    class TwoLayers(nn.Module):
        def __init__(self, s=8):
            super().__init__()
            self.a = SdpaAttention(mask=torch.ones(1, 1, s, s, dtype=torch.bool).tril())
            self.b = SdpaAttention()
            self.b.mask = self.a.mask  # GPT-2 and Llama as loaded: one causal mask for every layer

        def forward(self, x):
            return self.b(self.a(x))

    report = _optimize(TwoLayers(), torch.randn(2, 8, 32))
    assert report.fallback is None and report.ops_opaque == 0, (report.fallback, report.opaque_ops)
