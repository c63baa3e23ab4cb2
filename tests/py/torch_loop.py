"""A CPU torch training loop for tests/e2e/motion_torch.sh and bench/bench_motion.c: a small
nn.Module (a few layers, a forward hook), autograd and an SGD step, forever, at module level,
so the main thread's stack changes every few microseconds and always has `<module>` of this
file at the bottom.

Usage: python3 torch_loop.py READY_PATH
READY_PATH is written (tmp + rename) after the first steps. The process exits when its parent
goes away or after MAX_LIFETIME seconds; SIGTERM and SIGINT keep their default action."""
import os
import signal
import sys
import time

import torch
from torch import nn

from readyfile import write_ready

MAX_LIFETIME = 1800.0  # seconds


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.lin = nn.Linear(width, width)
        self.norm = nn.LayerNorm(width)

    def forward(self, x):
        return torch.relu(self.norm(self.lin(x))) + x


class Net(nn.Module):
    def __init__(self, width=64, depth=4):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(width) for _ in range(depth)])
        self.head = nn.Linear(width, 1)

    def forward(self, x):
        return self.head(self.blocks(x))


def count_calls(module, inputs, output):
    STATS["hooks"] += 1


signal.signal(signal.SIGTERM, signal.SIG_DFL)
signal.signal(signal.SIGINT, signal.SIG_DFL)
torch.set_num_threads(1)
torch.manual_seed(0)
STATS = {"hooks": 0}
model = Net()
model.blocks[0].register_forward_hook(count_calls)
opt = torch.optim.SGD(model.parameters(), lr=1e-3)
loss_fn = nn.MSELoss()
x = torch.randn(32, 64)
y = torch.randn(32, 1)
PPID = os.getppid()
DEADLINE = time.monotonic() + MAX_LIFETIME
step = 0
while True:
    opt.zero_grad()
    loss = loss_fn(model(x), y)
    loss.backward()
    opt.step()
    step += 1
    if step == 20:
        write_ready(sys.argv[1])
    if step % 256 == 0 and (os.getppid() != PPID or time.monotonic() > DEADLINE):
        os._exit(0)
