import torch


def make():
    return torch.nn.Sequential(torch.nn.Linear(32, 16), torch.nn.ReLU())
