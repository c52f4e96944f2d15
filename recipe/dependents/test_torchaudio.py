"""torchaudio's functional ops against plain torch (what would run if a torchaudio release
paired with our pytorch; recipe/dependents.yaml says why none does). pytest file run by
`python -m feedstock downstream` (recipe/dependents.yaml: torchaudio)."""
import math

import torch
import torchaudio.functional as F


def test_amplitude_to_db_is_ten_log10():
    power = torch.tensor([1.0, 10.0, 100.0, 1e-3])
    got = F.amplitude_to_DB(power, multiplier=10.0, amin=1e-10, db_multiplier=0.0)
    assert torch.allclose(got, 10 * torch.log10(power))


def test_resample_keeps_a_low_tone():
    rate, tone = 16000, 440.0
    t = torch.arange(rate) / rate
    wave = torch.sin(2 * math.pi * tone * t)
    half = F.resample(wave, rate, rate // 2)
    want = torch.sin(2 * math.pi * tone * torch.arange(rate // 2) / (rate // 2))
    assert half.shape == (rate // 2,)
    assert torch.allclose(half[200:-200], want[200:-200], atol=1e-2)
