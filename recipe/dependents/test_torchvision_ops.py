"""torchvision's C++ operators on the CPU, against the torch of the environment they run in.

pytest file run by `python -m feedstock downstream` (recipe/dependents.yaml: torchvision). The
expected values are worked out by hand or by plain tensor code, not by torchvision itself."""
import os

import torch
import torchvision
from torchvision import ops


def test_nms_keeps_the_best_of_overlapping_boxes():
    boxes = torch.tensor([[0.0, 0.0, 10.0, 10.0], [1.0, 1.0, 11.0, 11.0], [20.0, 20.0, 30.0, 30.0]])
    scores = torch.tensor([0.9, 0.8, 0.7])
    # boxes 0 and 1 overlap with IoU 81/119 = 0.68: the lower-scored one goes
    assert ops.nms(boxes, scores, iou_threshold=0.5).tolist() == [0, 2]
    assert ops.nms(boxes, scores, iou_threshold=0.7).tolist() == [0, 1, 2]


def test_roi_align_averages_a_constant_region():
    image = torch.arange(16.0).reshape(1, 1, 4, 4)
    # the whole image as one box, one output cell, aligned: the mean of every pixel
    box = torch.tensor([[0.0, 0.0, 0.0, 4.0, 4.0]])
    out = ops.roi_align(image, box, output_size=(1, 1), spatial_scale=1.0, sampling_ratio=2, aligned=True)
    assert out.shape == (1, 1, 1, 1)
    assert torch.allclose(out.flatten(), torch.tensor([7.5]))


def test_deform_conv2d_with_zero_offsets_is_a_convolution():
    torch.manual_seed(0)
    x = torch.randn(2, 3, 7, 7)
    weight = torch.randn(4, 3, 3, 3)
    bias = torch.randn(4)
    offset = torch.zeros(2, 2 * 3 * 3, 5, 5)
    out = ops.deform_conv2d(x, offset, weight, bias)
    assert torch.allclose(out, torch.nn.functional.conv2d(x, weight, bias), atol=1e-5)


def test_ops_run_on_the_environments_libtorch():
    """torchvision's _C links libtorch: the copy loaded is the one next to this torch's prefix,
    not a second torch from pip."""
    ops.nms(torch.zeros(1, 4), torch.zeros(1), 0.5)
    loaded = {line.split()[-1] for line in open("/proc/self/maps") if "libtorch_cpu" in line}
    assert len({os.path.realpath(p) for p in loaded}) == 1, loaded
    prefix = os.path.realpath(os.environ.get("CONDA_PREFIX") or torch.__file__.split("/lib/python")[0])
    assert all(os.path.realpath(p).startswith(prefix + "/") for p in loaded), (loaded, prefix)
    # and torchvision's own extension is the wheel's, next to it in site-packages
    assert any("torchvision/_C" in line for line in open("/proc/self/maps")), torchvision.__file__
