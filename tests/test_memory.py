"""Peak memory of `sigconv denoise` stays bounded whatever the file length (one hour at 48 kHz)."""

from __future__ import annotations

import numpy as np
import soundfile as sf

from conftest import cli_peak_rss


def test_one_hour_file_peak_rss_under_300_mb(tmp_path, rng):
    fs, seconds = 48000, 3600
    src = tmp_path / "hour.wav"
    block = (rng.standard_normal(fs * 60) * 3000).astype(np.int16)  # one minute of noise, varied per minute
    with sf.SoundFile(str(src), "w", fs, 1, subtype="PCM_16") as f:
        for m in range(seconds // 60):
            f.write(np.roll(block, m * 977) // (1 + m % 3))
    assert sf.info(str(src)).frames == fs * seconds
    out = tmp_path / "hour.out.wav"
    rc, peak_kb, err = cli_peak_rss("denoise", src, "-o", out, "--quiet")
    assert rc == 0, err
    assert sf.info(str(out)).frames == fs * seconds
    print(f"peak RSS {peak_kb / 1024:.0f} MB for a {src.stat().st_size / 1e6:.0f} MB file")
    assert peak_kb < 300 * 1024, f"peak RSS {peak_kb / 1024:.0f} MB"
