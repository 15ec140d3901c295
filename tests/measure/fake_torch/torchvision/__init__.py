"""torchvision for fake_torch: every torchvision.models.NAME(weights=None)
builds a fake module (see ../torch/__init__.py)."""
import types

import torch


class _Models(types.ModuleType):
    def __getattr__(self, name):
        def build(weights=None, **kw):
            assert weights is None, "the truth scripts never download weights"
            return torch.nn.Module()
        return build


models = _Models("torchvision.models")
