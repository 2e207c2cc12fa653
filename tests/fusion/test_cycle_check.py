"""The bounded cycle check of `fuse` decides as the full walk does (Note [Cycle check in
near-linear time], ir/passes/fuse.py), on the graphs of a small training CNN and a
transformer layer, forward and backward."""

import torch
import torch.nn as nn

import ir.passes.fuse as fuse
import refcomp


def _full_walk(groups, union) -> bool:
    """The check with no bound: every path out of the union, to the graph's end."""
    return groups._creates_cycle(union, bound=len(groups.graph.nodes))


def test_bounded_check_decides_as_the_full_walk(monkeypatch):
    checks = []
    merge = fuse._Groups.try_merge

    def compared(self, a, b, why_context):
        ga, gb = self.find(a), self.find(b)
        if ga is not gb:
            union = set(self.members[ga] + self.members[gb])
            (bits_a, before_a, after_a), (bits_b, before_b, after_b) = self.reach[ga], \
                self.reach[gb]
            certain = (before_a | before_b) & (after_a | after_b) & self.real & \
                ~(bits_a | bits_b)
            fast = bool(certain) or self._creates_cycle(union)
            assert fast == _full_walk(self, union)
            checks.append(fast)
        return merge(self, a, b, why_context)

    monkeypatch.setattr(fuse._Groups, "try_merge", compared)
    layers = []
    for _ in range(3):
        layers += [nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4), nn.ReLU()]
    refcomp.reset()
    refcomp.compile(nn.Sequential(*layers), backend="llvm")(
        torch.randn(2, 4, 8, 8)).sum().backward()
    block = nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True)
    refcomp.compile(block, backend="llvm")(torch.randn(2, 5, 16)).sum().backward()
    assert len(checks) > 100 and True in checks and False in checks  # both outcomes seen
