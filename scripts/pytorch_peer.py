#!/usr/bin/env python3
"""The peer for lenet5's benchmark: the same LeNet-5 trained the same way in PyTorch.

Same network as lenet5's default (book ordering: convolution without bias, 2x2 average pooling,
per-map bias, then the activation; C5 with bias and the activation; F6 with the activation; linear
output; softmax cross-entropy), same input preparation (x/255, normalised with mean 0.1307 and std
0.3081, padded to 32x32), same initialisation (U(+-sqrt(3/fan_in)), biases 0), same optimiser
(SGD with momentum, classical or Nesterov, weight decay on every parameter, the batch-mean
gradient) and the same per-step learning-rate schedules. The data set lives on the GPU; each epoch
reshuffles it with a seeded generator.

The hyperparameters come from a lenet5 config file's [train] section (--config, the keys lenet5
reads, e.g. configs/lenet5.toml), over lenet5's own defaults; flags on the command line win over
the file, as they do for lenet5. With `augment = "affine"` or `"elastic"` (or --augment) every
training image is transformed anew each step as lenet5 does it (src/core/augment.hpp): a random
rotation, scale, horizontal shear and shift drawn uniformly from the configured ranges, then for
"elastic" Simard's displacement field (uniform noise in [-1, 1) per pixel and axis, smoothed by a
Gaussian of width sigma cut at 3 sigma with clamped edges, times alpha), resampled bilinearly with
black outside the image. The random numbers are PyTorch's, so the images are drawn from the same
distribution as lenet5's, not the same images.

Modes: "eager" (torch.optim.SGD, one Python step per batch) and "graph" (the whole training step,
augmentation, forward, backward and the SGD update, captured once in a CUDA graph and replayed per
batch). Prints one JSON line per epoch and one summary line, as `lenet5 bench` does.

--device cpu runs the eager mode on the CPU instead (the data set in memory, --threads intra-op
threads, default torch's own choice), the peer of lenet5 --device cpu
(scripts/bench_cpu_vs_pytorch.sh).
"""
import argparse
import gzip
import json
import math
import os
import statistics
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

# lenet5's input scalings (src/core/net_config.cpp's table): (grey/255 - mean) / std; "dataset"
# takes the data set's own.
SCALINGS = {"mnist": (0.1307, 0.3081), "fashion-mnist": (0.2860406, 0.3530242),
            "lecun1998": (0.1 / 1.275, 1 / 1.275)}
# What --augment dataset chooses for each data set (src/data/datasets.cpp's table, which says why).
DATASET_AUGMENTS = {"mnist": "elastic", "fashion-mnist": "none"}
SIDE = 28                       # MNIST's images; the network sees them padded to 32
CENTRE = (SIDE - 1) / 2.0       # 13.5: rotation and scale about it (core/augment.hpp)

# lenet5's defaults (src/train/settings.cpp's table), keyed as in a config file's [train] section;
# tests/cpu/test_bench.cpp checks that they are the table's. A config file overrides them, and the
# command line overrides both.
DEFAULTS = {
    "dataset": "mnist", "data": "", "train-limit": 0, "validation": 5000, "epochs": 20, "batch-size": 128, "lr": 0.05,
    "schedule": "cosine", "lr-gamma": 0.1, "lr-step-epochs": 1.0, "min-lr": 0.0,
    "warmup-epochs": 0.0, "one-cycle-start": 0.25, "momentum": 0.9, "nesterov": False,
    "weight-decay": 5e-4, "optimizer": "sgd", "sdlm-mu": 0.02, "sdlm-samples": 500, "seed": 1,
    "activation": "relu", "subsampling": "max", "c3-table": "full", "output": "softmax", "conv-units": "linear",
    "input-scaling": "dataset",
    "augment": "dataset", "augment-rotation": 10.0, "augment-scale": 0.1,
    "augment-shear": 10.0, "augment-translation": 2.0, "elastic-alpha": 10.0, "elastic-sigma": 4.0,
    "augment-low-resolution": 0.0, "augment-low-resolution-scan": 8.0,
}
# Settings of lenet5 alone (which device and how many threads, which kernels in which precision,
# where to write, what to evaluate): accepted in a config, not used (the peer takes --device and
# --threads of its own, and computes in float32).
LENET5_ONLY = {"device", "threads", "out", "evaluate", "evaluate-training-set", "kernels",
               "conv-algo", "precision"}
CHOICES = {
    # Both in MNIST's file names and layout (src/data/datasets.cpp); the folder's default differs.
    "dataset": ["mnist", "fashion-mnist"],
    "schedule": ["constant", "step", "exponential", "cosine", "one-cycle"],
    "activation": ["tanh", "sigmoid", "scaled-tanh", "relu"],
    "augment": ["dataset", "none", "affine", "elastic"],
    # The peer implements the book's network only: refused, not silently trained differently.
    "subsampling": ["average"],
    "c3-table": ["full"],
    "output": ["softmax"],
    "conv-units": ["linear"],
    # The peer trains with SGD only (lenet5's sdlm and its lecun1998 schedule are refused).
    "optimizer": ["sgd"],
    "input-scaling": ["dataset", "mnist", "fashion-mnist", "lecun1998"],
}


# ---- settings ---------------------------------------------------------------------------------
def parse_toml_train_section(text):
    """The [train] section of a lenet5 config, for Pythons without tomllib (before 3.11): one
    `key = value` per line, values quoted strings, true/false or numbers, # comments."""
    values, section = {}, None
    for number, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()  # no "#" inside the values lenet5 takes
        if not line:
            continue
        if line.startswith("["):
            section = line.strip("[] ")
            continue
        if section != "train":
            continue
        key, sep, value = (part.strip() for part in line.partition("="))
        if not sep:
            raise ValueError(f"line {number}: expected key = value, got {raw!r}")
        if value[:1] in "\"'":
            values[key] = value[1:value.index(value[0], 1)]
        elif value in ("true", "false"):
            values[key] = value == "true"
        else:
            values[key] = float(value) if any(c in value for c in ".eE") else int(value)
    return values


def read_config(path):
    with open(path, "rb") as f:
        data = f.read()
    try:
        import tomllib  # Python 3.11 and later
        return tomllib.loads(data.decode()).get("train", {})
    except ImportError:
        return parse_toml_train_section(data.decode())


def settings_from(config_path, overrides):
    """lenet5's defaults, then the config's [train] keys, then the flags given."""
    settings = dict(DEFAULTS)
    if config_path:
        for key, value in read_config(config_path).items():
            if key in LENET5_ONLY:
                continue
            if key not in DEFAULTS:
                sys.exit(f"pytorch_peer: {config_path}: [train] key '{key}' is not a lenet5 setting")
            settings[key] = type(DEFAULTS[key])(value) if not isinstance(DEFAULTS[key], bool) else value
    settings.update({k: v for k, v in overrides.items() if v is not None})
    for key, accepted in CHOICES.items():
        if settings[key] not in accepted:
            sys.exit(f"pytorch_peer: {key} '{settings[key]}' is not supported here "
                     f"(accepted: {', '.join(accepted)})")
    if settings["nesterov"] and settings["momentum"] == 0:
        sys.exit("pytorch_peer: nesterov needs momentum above 0")
    if settings["augment"] == "dataset":
        settings["augment"] = DATASET_AUGMENTS[settings["dataset"]]
    return settings


# ---- data ---------------------------------------------------------------------------------------
def read_idx(path):
    opener = gzip.open if not os.path.exists(path) and os.path.exists(path + ".gz") else open
    with opener(path if os.path.exists(path) else path + ".gz", "rb") as f:
        data = f.read()
    rank = data[3]
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(rank)]
    return np.frombuffer(data, dtype=np.uint8, offset=4 + 4 * rank).reshape(dims)


def intensities(images, device):
    """(N, 28, 28) pixel / 255: black is 0, the background augmentation fills in."""
    return torch.tensor(images, dtype=torch.float32, device=device).div_(255)


def normalise_and_pad(x, scaling):
    """(N, 28, 28) intensities -> (N, 1, 32, 32) network input, under the (mean, std) scaling."""
    mean, std = scaling
    x = (x - mean) / std
    return F.pad(x, (2, 2, 2, 2), value=(0 - mean) / std).unsqueeze(1)


def input_scaling(s):
    """The (mean, std) that --input-scaling names; dataset: the data set's own, as lenet5."""
    name = s["input-scaling"]
    return SCALINGS[s["dataset"] if name == "dataset" else name]


# ---- augmentation (src/core/augment.hpp and src/data/augment.cpp, in PyTorch) ------------------
def smoothing_matrix(sigma, device):
    """G with G[out, in] = the Gaussian's weight of `in` for `out`, edges clamped: the separable
    smoothing of a field f is G @ f @ G.T (along y, then along x)."""
    radius = int(math.ceil(3 * sigma))
    taps = [math.exp(-0.5 * k * k / (sigma * sigma)) for k in range(-radius, radius + 1)]
    total = sum(taps)
    g = torch.zeros(SIDE, SIDE, dtype=torch.float64)
    for out in range(SIDE):
        for k in range(-radius, radius + 1):
            g[out, min(max(out + k, 0), SIDE - 1)] += taps[k + radius] / total
    return g.to(device=device, dtype=torch.float32)


def resolution_operators(smallest, device):
    """(29 - smallest, 28, 28): the identity, then for each side m from smallest to 27 the matrix A
    with A @ x @ A.T = x reduced to m x m by area averaging and enlarged back bilinearly (lenet5's
    area_mean and enlarged_bilinear, core/augment.hpp), so that a batch picks its samples'
    operators by index with static shapes, as a CUDA graph needs."""
    operators = [torch.eye(SIDE, device=device)]
    for m in range(smallest, SIDE):
        step = SIDE / m
        down = torch.zeros(m, SIDE, device=device)
        for o in range(m):
            for i in range(SIDE):
                overlap = min((o + 1) * step, i + 1) - max(o * step, i)
                if overlap > 0:
                    down[o, i] = overlap / step
        up = torch.zeros(SIDE, m, device=device)
        for x in range(SIDE):
            u = min(max((x + 0.5) * m / SIDE - 0.5, 0.0), m - 1.0)
            i = int(u)
            up[x, i] += 1 - (u - i)
            up[x, min(i + 1, m - 1)] += u - i
        operators.append(up @ down)
    return torch.stack(operators)


class Augmenter:
    """Transforms a batch of (B, 28, 28) intensities; draws from PyTorch's default CUDA generator
    (seeded by the run's seed), which a CUDA graph may capture."""

    def __init__(self, s, device):
        self.kind = s["augment"]
        self.rotation = math.radians(s["augment-rotation"])
        self.scale, self.shear = s["augment-scale"], math.radians(s["augment-shear"])
        self.translation, self.alpha = s["augment-translation"], s["elastic-alpha"]
        self.smooth = smoothing_matrix(s["elastic-sigma"], device) if self.kind == "elastic" else None
        offsets = torch.arange(SIDE, dtype=torch.float32, device=device) - CENTRE
        self.oy, self.ox = torch.meshgrid(offsets, offsets, indexing="ij")  # (28, 28) each
        self.low_resolution = s["augment-low-resolution"]
        self.smallest = int(SIDE * s["augment-low-resolution-scan"] / 20 + 0.5)
        self.resolution = (resolution_operators(self.smallest, device)
                           if self.low_resolution > 0 else None)

    def __call__(self, x):
        b = x.shape[0]
        u = torch.rand(b, 5, device=x.device) * 2 - 1  # rotation, scale, shear, shift x, shift y
        angle, scale = self.rotation * u[:, 0], 1 + self.scale * u[:, 1]
        shear = torch.tan(self.shear * u[:, 2])
        c, sn = torch.cos(angle), torch.sin(angle)
        # Forward map: output = R * Sh * (scale * input) + shift; the sampler needs its inverse.
        f11, f12 = scale * c, scale * (c * shear - sn)
        f21, f22 = scale * sn, scale * (sn * shear + c)
        det = f11 * f22 - f12 * f21
        a11, a12, a21, a22 = f22 / det, -f12 / det, -f21 / det, f11 / det
        shift_x, shift_y = self.translation * u[:, 3], self.translation * u[:, 4]
        tx, ty = -(a11 * shift_x + a12 * shift_y), -(a21 * shift_x + a22 * shift_y)
        col = lambda v: v.view(b, 1, 1)
        sx = col(a11) * self.ox + col(a12) * self.oy + col(tx) + CENTRE  # (B, 28, 28)
        sy = col(a21) * self.ox + col(a22) * self.oy + col(ty) + CENTRE
        if self.kind == "elastic":
            noise = torch.rand(b, 2, SIDE, SIDE, device=x.device) * 2 - 1
            field = self.alpha * (self.smooth @ noise @ self.smooth.T)
            sx, sy = sx + field[:, 0], sy + field[:, 1]
        # align_corners=True puts -1 and 1 on the centres of pixels 0 and 27; "zeros" makes every
        # neighbour outside the image black, as lenet5's bilinear sampler does.
        grid = torch.stack((sx, sy), dim=-1) * (2.0 / (SIDE - 1)) - 1
        y = F.grid_sample(x.unsqueeze(1), grid, mode="bilinear", padding_mode="zeros",
                          align_corners=True).squeeze(1)
        if self.resolution is None:
            return y
        # The resolution stage: the share --augment-low-resolution of the samples, each at a side
        # drawn evenly from smallest to 27 (index 0, the identity, for the others).
        r = torch.rand(b, 2, device=x.device)
        side = 1 + (r[:, 1] * (SIDE - self.smallest)).long()
        a = self.resolution[torch.where(r[:, 0] < self.low_resolution, side, torch.zeros_like(side))]
        return a @ y @ a.transpose(1, 2)


# ---- the network ------------------------------------------------------------------------------
ACTIVATIONS = {
    "tanh": torch.tanh,
    "sigmoid": torch.sigmoid,
    "scaled-tanh": lambda x: 1.7159 * torch.tanh(x * (2.0 / 3.0)),  # LeCun's, f(+-1) = +-1
    "relu": torch.relu,
}


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


def forward(p, x, act):
    x = act(F.avg_pool2d(F.conv2d(x, p["c1.weight"]), 2) + p["s2.bias"].view(1, -1, 1, 1))
    x = act(F.avg_pool2d(F.conv2d(x, p["c3.weight"]), 2) + p["s4.bias"].view(1, -1, 1, 1))
    x = act(F.conv2d(x, p["c5.weight"], p["c5.bias"]).flatten(1))
    x = act(F.linear(x, p["f6.weight"], p["f6.bias"]))
    return F.linear(x, p["output.weight"], p["output.bias"])


def learning_rate(s, epochs_done):
    """src/train/schedule.cpp's Schedule::rate: the rate for the step that starts at
    `epochs_done` (2.5 = halfway through the third epoch)."""
    lr, min_lr, kind = s["lr"], s["min-lr"], s["schedule"]
    progress = min(max(epochs_done / s["epochs"], 0.0), 1.0)
    if kind == "one-cycle":  # linear rise from lr/25 to lr, then cosine to min-lr; no warm-up
        start, rise = lr / 25, s["one-cycle-start"]
        if progress < rise:
            return start + (lr - start) * progress / rise
        fall = (progress - rise) / (1 - rise)
        return min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * fall))
    value = {
        "constant": lambda: lr,
        "step": lambda: lr * s["lr-gamma"] ** math.floor(epochs_done / s["lr-step-epochs"]),
        "exponential": lambda: lr * s["lr-gamma"] ** math.floor(epochs_done),
        "cosine": lambda: min_lr + (lr - min_lr) * 0.5 * (1 + math.cos(math.pi * progress)),
    }[kind]()
    if s["warmup-epochs"] > 0 and epochs_done < s["warmup-epochs"]:
        value *= epochs_done / s["warmup-epochs"]
    return value


def evaluate(p, x, y, act):
    with torch.no_grad():
        correct = sum(int((forward(p, x[i:i + 1000], act).argmax(1) == y[i:i + 1000]).sum())
                      for i in range(0, len(x), 1000))
    return correct / len(x)


# ---- the two trainers -------------------------------------------------------------------------
class EagerTrainer:
    def __init__(self, params, s, prepare, act):
        self.params = list(params.values())
        self.opt = torch.optim.SGD(self.params, lr=s["lr"], momentum=s["momentum"],
                                   nesterov=s["nesterov"], weight_decay=s["weight-decay"])
        self.p, self.prepare, self.act = params, prepare, act

    def step(self, xb, yb, lr):
        for group in self.opt.param_groups:
            group["lr"] = lr
        self.opt.zero_grad(set_to_none=True)
        F.cross_entropy(forward(self.p, self.prepare(xb), self.act), yb).backward()
        self.opt.step()


class GraphTrainer:
    """The whole step in one CUDA graph; static input buffers are refilled before each replay."""

    def __init__(self, params, s, prepare, act, batch_shape, device):
        self.p, self.params, self.prepare, self.act = params, list(params.values()), prepare, act
        self.momentum, self.decay, self.nesterov = s["momentum"], s["weight-decay"], s["nesterov"]
        self.velocity = [torch.zeros_like(t) for t in self.params]
        self.lr = torch.zeros((), device=device)
        self.x = torch.zeros(batch_shape, device=device)
        self.y = torch.zeros(batch_shape[0], dtype=torch.long, device=device)
        self.graph = None

    def _step(self):
        loss = F.cross_entropy(forward(self.p, self.prepare(self.x), self.act), self.y)
        grads = torch.autograd.grad(loss, self.params)
        with torch.no_grad():  # torch.optim.SGD's update, written with tensors a graph can replay
            for t, g, v in zip(self.params, grads, self.velocity):
                g = g + self.decay * t
                v.mul_(self.momentum).add_(g)
                t.sub_(self.lr * (g + self.momentum * v if self.nesterov else v))

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


# ---- the run ----------------------------------------------------------------------------------
def parse_arguments():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--config", help="a lenet5 config file; its [train] section sets the "
                    "hyperparameters (default: lenet5's built-in defaults)")
    ap.add_argument("--mode", choices=["eager", "graph"], default="eager")
    ap.add_argument("--device", choices=["cuda", "cpu"], default="cuda",
                    help="where to train (cpu: eager mode only)")
    ap.add_argument("--threads", type=int, default=None,
                    help="cpu: torch.set_num_threads (default: torch's own choice)")
    # Each flag overrides the config's key of the same name; None: not given.
    for key, default in DEFAULTS.items():
        flag = "--" + key
        if isinstance(default, bool):
            ap.add_argument(flag, choices=["true", "false"], default=None,
                            help=f"(lenet5 default: {str(default).lower()})")
        else:
            ap.add_argument(flag, type=type(default), default=None, choices=CHOICES.get(key),
                            help=f"(lenet5 default: {default})")
    args = ap.parse_args()
    overrides = {key: getattr(args, key.replace("-", "_")) for key in DEFAULTS}
    for key, default in DEFAULTS.items():
        if isinstance(default, bool) and overrides[key] is not None:
            overrides[key] = overrides[key] == "true"
    return args, settings_from(args.config, overrides)


def load(s, device):
    # As lenet5 finds it: --data, else $LENET5_DATA, else data/mnist or data/fashion-mnist.
    folder = s["data"] or os.environ.get("LENET5_DATA") or os.path.join("data", s["dataset"])

    def path(name):
        return os.path.join(folder, name)
    x_train = intensities(read_idx(path("train-images-idx3-ubyte")), device)
    y_train = torch.tensor(read_idx(path("train-labels-idx1-ubyte")), dtype=torch.long, device=device)
    # As lenet5 holds them out (src/data/mnist.cpp): the last N training images choose the best
    # epoch; the test set only reports.
    kept = len(x_train) - s["validation"]
    if s["validation"] < 0 or kept < 1:
        sys.exit(f"pytorch_peer: --validation {s['validation']} leaves no training image")
    x_val = normalise_and_pad(x_train[kept:], input_scaling(s))
    y_val = y_train[kept:]
    x_train, y_train = x_train[:kept], y_train[:kept]
    if s["train-limit"] > 0:
        x_train, y_train = x_train[:s["train-limit"]], y_train[:s["train-limit"]]
    x_test = normalise_and_pad(intensities(read_idx(path("t10k-images-idx3-ubyte")), device),
                               input_scaling(s))
    y_test = torch.tensor(read_idx(path("t10k-labels-idx1-ubyte")), dtype=torch.long, device=device)
    return x_train, y_train, x_val, y_val, x_test, y_test


def main():
    args, s = parse_arguments()
    device = torch.device(args.device)
    on_gpu = device.type == "cuda"
    if not on_gpu and args.mode != "eager":
        sys.exit("pytorch_peer: --device cpu runs the eager mode only (a CUDA graph needs a GPU)")
    if args.threads is not None:
        torch.set_num_threads(args.threads)
    synchronize = torch.cuda.synchronize if on_gpu else (lambda: None)
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(s["seed"])  # the augmentation's draws (the default CUDA generator)
    act = ACTIVATIONS[s["activation"]]
    x_train, y_train, x_val, y_val, x_test, y_test = load(s, device)
    if s["augment"] == "none":
        # Prepared once: each step only gathers its batch, as before augmentation existed.
        x_train, prepare = normalise_and_pad(x_train, input_scaling(s)), (lambda x: x)
    else:
        augment = Augmenter(s, device)
        prepare = lambda x: normalise_and_pad(augment(x), input_scaling(s))
    params = make_parameters(s["seed"], device)
    n, b = len(x_train), s["batch-size"]
    # Full batches only in graph mode (a graph has fixed shapes): the last 32 images of an epoch
    # at batch 64 are left out there, in both modes, so that both train on the same images.
    steps = n // b
    if args.mode == "eager":
        trainer = EagerTrainer(params, s, prepare, act)
    else:
        trainer = GraphTrainer(params, s, prepare, act, (b,) + tuple(x_train.shape[1:]), device)
    setup_start = time.perf_counter()
    if args.mode == "graph":
        trainer.capture()
    synchronize()
    setup_s = time.perf_counter() - setup_start
    shuffle = torch.Generator(device=device).manual_seed(s["seed"])
    times, accuracies, validated, elapsed = [], [], [], 0.0
    time_to = {0.99: None, 0.992: None}
    for epoch in range(s["epochs"]):
        order = torch.randperm(n, generator=shuffle, device=device)
        synchronize()
        start = time.perf_counter()
        for step in range(steps):
            idx = order[step * b:(step + 1) * b]
            trainer.step(x_train[idx], y_train[idx], learning_rate(s, epoch + step / steps))
        synchronize()
        seconds = time.perf_counter() - start
        times.append(seconds)
        elapsed += seconds
        accuracies.append(evaluate(params, x_test, y_test, act))
        validated.append(evaluate(params, x_val, y_val, act) if len(x_val) else None)
        for target in time_to:
            if time_to[target] is None and accuracies[-1] >= target:
                time_to[target] = elapsed
        print(json.dumps({"event": "epoch", "framework": "pytorch", "mode": args.mode,
                          "epoch": epoch + 1, "seconds": seconds,
                          "images_per_s": steps * b / seconds,
                          "validation_accuracy": validated[-1],
                          "test_accuracy": accuracies[-1]}), flush=True)
    steady = times[1:] if len(times) > 1 else times
    print(json.dumps({"event": "summary", "framework": "pytorch", "mode": args.mode,
                      "torch": torch.__version__, "device": device.type,
                      "gpu": torch.cuda.get_device_name() if on_gpu else None,
                      "threads": torch.get_num_threads(),
                      "config": args.config, "settings": s,
                      "batch_size": b, "epochs": s["epochs"], "seed": s["seed"],
                      "augment": s["augment"],
                      "median_epoch_s": statistics.median(steady), "setup_s": setup_s,
                      "training_s": elapsed, "final_test_accuracy": accuracies[-1],
                      "final_validation_accuracy": validated[-1],
                      # The test accuracy of the first epoch the held-out images read best.
                      "chosen_test_accuracy": accuracies[validated.index(max(validated))]
                      if validated[-1] is not None else None,
                      "time_to_99_s": time_to[0.99], "time_to_99_2_s": time_to[0.992],
                      "peak_memory_mb": torch.cuda.max_memory_allocated() / 2**20 if on_gpu
                      else None}), flush=True)


if __name__ == "__main__":
    main()
