"""The seed 001 examples (the article's models), shared by the frontend tests."""

import torch
import torch.nn as nn


class Simple(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(4, 2)

    def forward(self, x):
        return torch.relu(self.fc(x))


class BadIf(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(16, 16)

    def forward(self, x):
        if torch.rand(1) > 0.5:  # Python if on tensor
            return self.h(x) + 1
        else:
            return self.h(x) - 1


class GoodWhere(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(16, 16)

    def forward(self, x):
        y = self.h(x)
        return torch.where(torch.rand(1) > 0.5, y + 1, y - 1)


class LogInsideForward(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(16, 1)

    def forward(self, x):
        y = self.h(x)
        m = y.mean().item()  # noqa: F841  (forces a device-to-host sync)
        return y


class ReturnTensorForLog(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(16, 1)

    def forward(self, x):
        y = self.h(x)
        return y, y.mean().detach()


class BadLoop(nn.Module):
    def forward(self, x):
        out = x
        for i in range(5):  # Python loop
            out = out + i
        return out


class GoodVectorized(nn.Module):
    def forward(self, x):
        return x + torch.arange(5, device=x.device).sum()


class BadShapeBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(32, 16)

    def forward(self, x):
        if x.shape[1] == 16:  # Python check
            return self.a(x)
        else:
            return self.b(x)


class GoodDynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.h = nn.Linear(16, 16)

    def forward(self, x):
        return self.h(x)
