#!/usr/bin/env python3
"""Workload vgg: a VGG-like CNN of 5.6M parameters on Fashion-MNIST, SGD with momentum 0.9.

    python3 bench/e2e/workload_vgg.py --backend ddp --hook none|fp16|powersgd|postlocal|diloco [--powersgd-rank R] [--period H] ...
    PYTHONPATH=build/ci/python python3 bench/e2e/workload_vgg.py --backend sketchps   # SKETCHPS_* set

Two 3x3 conv blocks (1->32, 32->64 channels, ReLU, 2x2 max-pool: 28 -> 14 -> 7), then
Linear 3136->1536->512->10: 99.7% of the 5,629,322 parameters are in the Linear layers. Backends,
data order, schedule and evaluation: workload_common.py.

Sizing (bench/e2e/README.md "Sizing", measured with bench/e2e/sizing.py on this 2-core machine):
4 workers x batch 16, 200 rounds, lr 0.1 with a 10-round warm-up and a cosine. A round's gradient
is 22.5 MB: the gloo all-reduce alone takes 2.96 s at 100mbit; compute 0.49 s per round (4
processes at once, quiet machine); a DDP dense round 3.28 s at 100mbit (85% communicating), 1.09 s
at 1gbit; the whole DDP dense run about 12 minutes at 100mbit. Expected DDP dense final accuracy
83.9% (target 82.9%, or the measured DDP dense accuracy - 1 point).
"""
import torch.nn as nn

from workload_common import Workload, main

JOB = """\
# bench/e2e workload vgg (bench/e2e/workload_vgg.py): the model and the optimizer's keys come from the script
job_id: e2e-vgg
mode: ps
workers: 4
servers: 2
data: {path: /usr/share/datasets/fashion-mnist, batch_size: 16, train_samples: 60000}
train: {rounds: 200, eval_every_rounds: 25, eval_samples: 2000, seed: 1}
optimizer: {lr: 0.1, momentum: 0.9, schedule: cosine, warmup: 10 rounds, warmup_start_factor: 0.1}
scheme: {name: gs_sgd, density: 0.002}
"""


class Vgg(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Sequential(
            nn.Flatten(), nn.Linear(64 * 7 * 7, 1536), nn.ReLU(), nn.Linear(1536, 512), nn.ReLU(), nn.Linear(512, 10))

    def forward(self, x):
        return self.classifier(self.features(x))


WORKLOAD = Workload(name="vgg", job=JOB, build=Vgg, expected_accuracy=0.839)

if __name__ == "__main__":
    main(WORKLOAD)
