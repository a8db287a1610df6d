#!/usr/bin/env python3
"""The peer for lenet5's benchmark: the same LeNet-5 trained the same way in PyTorch.

Same network as lenet5's default (book ordering: convolution without bias, 2x2 average pooling,
per-map bias, tanh; C5 with bias and tanh; F6 with tanh; linear output; softmax cross-entropy),
same input preparation (x/255, normalised with mean 0.1307 and std 0.3081, padded to 32x32),
same initialisation (U(+-sqrt(3/fan_in)), biases 0), same optimiser (SGD, momentum 0.9, weight
decay on every parameter, the batch-mean gradient) and the same per-step cosine schedule. The data
set lives on the GPU; each epoch reshuffles it with a seeded generator.

Modes: "eager" (torch.optim.SGD, one Python step per batch) and "graph" (the whole training step,
forward, backward and the SGD update, captured once in a CUDA graph and replayed per batch).
Prints one JSON line per epoch and one summary line, as `lenet5 bench` does.
"""
import argparse
import gzip
import json
import math
import os
import statistics
import time

import numpy as np
import torch
import torch.nn.functional as F

MEAN, STD = 0.1307, 0.3081


def read_idx(path):
    opener = gzip.open if not os.path.exists(path) and os.path.exists(path + ".gz") else open
    with opener(path if os.path.exists(path) else path + ".gz", "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def prepare(images, device):
    x = torch.tensor(images, dtype=torch.float32, device=device).div_(255).sub_(MEAN).div_(STD)
    return F.pad(x, (2, 2, 2, 2), value=(0 - MEAN) / STD).unsqueeze(1)  # (N, 1, 32, 32)


def lecun_uniform(shape, fan_in, generator, device):
    bound = math.sqrt(3.0 / fan_in)
    return ((torch.rand(shape, generator=generator, device=device) * 2 - 1) * bound).requires_grad_()


def make_parameters(seed, device):
    g = torch.Generator(device=device).manual_seed(seed)
    zeros = lambda n: torch.zeros(n, device=device, requires_grad=True)
    return {
        "c1.weight": lecun_uniform((6, 1, 5, 5), 25, g, device), "s2.bias": zeros(6),
        "c3.weight": lecun_uniform((16, 6, 5, 5), 150, g, device), "s4.bias": zeros(16),
        "c5.weight": lecun_uniform((120, 16, 5, 5), 400, g, device), "c5.bias": zeros(120),
        "f6.weight": lecun_uniform((84, 120), 120, g, device), "f6.bias": zeros(84),
        "output.weight": lecun_uniform((10, 84), 84, g, device), "output.bias": zeros(10),
    }


def forward(p, x):
    x = torch.tanh(F.avg_pool2d(F.conv2d(x, p["c1.weight"]), 2) + p["s2.bias"].view(1, -1, 1, 1))
    x = torch.tanh(F.avg_pool2d(F.conv2d(x, p["c3.weight"]), 2) + p["s4.bias"].view(1, -1, 1, 1))
    x = torch.tanh(F.conv2d(x, p["c5.weight"], p["c5.bias"]).flatten(1))
    x = torch.tanh(F.linear(x, p["f6.weight"], p["f6.bias"]))
    return F.linear(x, p["output.weight"], p["output.bias"])


def cosine_rate(lr, epochs, epoch, step, steps):
    progress = min(max((epoch + step / steps) / epochs, 0.0), 1.0)
    return lr * 0.5 * (1 + math.cos(math.pi * progress))


def evaluate(p, x, y):
    with torch.no_grad():
        correct = sum(int((forward(p, x[i:i + 1000]).argmax(1) == y[i:i + 1000]).sum())
                      for i in range(0, len(x), 1000))
    return correct / len(x)


class EagerTrainer:
    def __init__(self, params, args):
        self.params = list(params.values())
        self.opt = torch.optim.SGD(self.params, lr=args.lr, momentum=args.momentum,
                                   weight_decay=args.weight_decay)
        self.p = params

    def step(self, xb, yb, lr):
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(forward(self.p, xb), yb).backward()
        self.opt.step()


class GraphTrainer:
    """The whole step in one CUDA graph; static input buffers are refilled before each replay."""

    def __init__(self, params, args, batch, device):
        self.p, self.params = params, list(params.values())
        self.momentum, self.decay = args.momentum, args.weight_decay
        self.velocity = [torch.zeros_like(t) for t in self.params]
        self.lr = torch.zeros((), device=device)
        self.x = torch.zeros(batch, 1, 32, 32, device=device)
        self.y = torch.zeros(batch, dtype=torch.long, device=device)
        self.graph = None

    def _step(self):
        loss = F.cross_entropy(forward(self.p, self.x), self.y)
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():  # torch.optim.SGD's update, written with tensors a graph can replay
            for t, g, v in zip(self.params, grads, self.velocity):
                g = g + self.decay * t
                v.mul_(self.momentum).add_(g)
                t.sub_(self.lr * v)

    def capture(self):
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):  # warm-up, as torch.cuda.graphs requires
            saved = [t.detach().clone() for t in self.params + self.velocity]
            for _ in range(3):
                self._step()
            with torch.no_grad():
                for t, s in zip(self.params + self.velocity, saved):
                    t.copy_(s)
        torch.cuda.current_stream().wait_stream(side)
        self.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(self.graph):
            self._step()

    def step(self, xb, yb, lr):
        self.x.copy_(xb)
        self.y.copy_(yb)
        self.lr.fill_(lr)
        self.graph.replay()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", default="data/mnist")
    ap.add_argument("--mode", choices=["eager", "graph"], default="eager")
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--batch-size", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.07)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--weight-decay", type=float, default=5e-4)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    device = torch.device("cuda")
    torch.backends.cudnn.benchmark = True
    x_train = prepare(read_idx(os.path.join(args.data, "train-images-idx3-ubyte")), device)
    y_train = torch.tensor(read_idx(os.path.join(args.data, "train-labels-idx1-ubyte")),
                           dtype=torch.long, device=device)
    x_test = prepare(read_idx(os.path.join(args.data, "t10k-images-idx3-ubyte")), device)
    y_test = torch.tensor(read_idx(os.path.join(args.data, "t10k-labels-idx1-ubyte")),
                          dtype=torch.long, device=device)
    params = make_parameters(args.seed, device)
    n, b = len(x_train), args.batch_size
    # Full batches only in graph mode (a graph has fixed shapes): the last 32 images of an epoch
    # at batch 64 are left out there, in both modes, so that both train on the same images.
    steps = n // b
    trainer = EagerTrainer(params, args) if args.mode == "eager" else GraphTrainer(params, args, b, device)
    setup_start = time.perf_counter()
    if args.mode == "graph":
        trainer.capture()
    torch.cuda.synchronize()
    setup_s = time.perf_counter() - setup_start
    shuffle = torch.Generator(device=device).manual_seed(args.seed)
    times, elapsed, time_to_99, accuracy = [], 0.0, None, 0.0
    for epoch in range(args.epochs):
        order = torch.randperm(n, generator=shuffle, device=device)
        torch.cuda.synchronize()
        start = time.perf_counter()
        for step in range(steps):
            idx = order[step * b:(step + 1) * b]
            trainer.step(x_train[idx], y_train[idx], cosine_rate(args.lr, args.epochs, epoch, step, steps))
        torch.cuda.synchronize()
        seconds = time.perf_counter() - start
        times.append(seconds)
        elapsed += seconds
        accuracy = evaluate(params, x_test, y_test)
        if time_to_99 is None and accuracy >= 0.99:
            time_to_99 = elapsed
        print(json.dumps({"event": "epoch", "framework": "pytorch", "mode": args.mode,
                          "epoch": epoch + 1, "seconds": seconds,
                          "images_per_s": steps * b / seconds, "test_accuracy": accuracy}), flush=True)
    steady = times[1:] if len(times) > 1 else times
    print(json.dumps({"event": "summary", "framework": "pytorch", "mode": args.mode,
                      "torch": torch.__version__, "gpu": torch.cuda.get_device_name(),
                      "batch_size": b, "epochs": args.epochs, "seed": args.seed,
                      "median_epoch_s": statistics.median(steady), "setup_s": setup_s,
                      "final_test_accuracy": accuracy, "time_to_99_s": time_to_99,
                      "peak_memory_mb": torch.cuda.max_memory_allocated() / 2**20}), flush=True)


if __name__ == "__main__":
    main()
