"""The PyTorch forms of models/lenet.prototxt and models/alexnet.prototxt, for the
benchmarks' PyTorch peers (bench/torch_train.py on the CPU, bench/torch_gpu_bench.py on
a GPU). Imported only where torch is.

LeNet: Power scale 0.0125, conv 20x5x5, max pool 2, conv 50x5x5, max pool 2, ip 500,
ReLU, ip `classes`. AlexNet: Caffe's, with groups of 2 in conv2, conv4 and conv5, LRN
(size 5, alpha 1e-4, beta 0.75, k 1) after conv1 and conv2, dropout 0.5 in fc6 and fc7.
"""
import torch.nn as nn
import torch.nn.functional as F


class LeNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 20, 5), nn.Conv2d(20, 50, 5)
        self.ip1, self.ip2 = nn.Linear(800, 500), nn.Linear(500, classes)

    def forward(self, x):
        x = F.max_pool2d(self.conv1(x * 0.0125), 2, 2)
        x = F.max_pool2d(self.conv2(x), 2, 2)
        return self.ip2(F.relu(self.ip1(x.flatten(1))))


class AlexNet(nn.Module):
    def __init__(self, classes):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 96, 11, stride=4), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0), nn.MaxPool2d(3, 2),
            nn.Conv2d(96, 256, 5, padding=2, groups=2), nn.ReLU(inplace=True),
            nn.LocalResponseNorm(5, alpha=1e-4, beta=0.75, k=1.0), nn.MaxPool2d(3, 2),
            nn.Conv2d(256, 384, 3, padding=1), nn.ReLU(inplace=True),
            nn.Conv2d(384, 384, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, 3, padding=1, groups=2), nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2))
        self.classifier = nn.Sequential(
            nn.Linear(256 * 6 * 6, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(4096, 4096), nn.ReLU(inplace=True), nn.Dropout(0.5),
            nn.Linear(4096, classes))

    def forward(self, x):
        return self.classifier(self.features(x).flatten(1))
