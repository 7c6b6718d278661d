"""Copy a study's figures into analysis/reports/<dest>/ as small PNGs (width <= 1400 px, 256 colours).

Octree quantisation keeps each line's own colour (median cut into 64 colours spent the palette on the
translucent bands and drew matplotlib's blue line in a grey-green: the legend no longer matched).

python analysis/reports/shrink.py results/length_bias/cpu/figures analysis/reports/length_bias
"""

import sys
from pathlib import Path

from PIL import Image

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
dst.mkdir(parents=True, exist_ok=True)
for p in sorted(src.glob("*.png")):
    im = Image.open(p).convert("RGB")
    if im.width > 1400:
        im = im.resize((1400, round(im.height * 1400 / im.width)), Image.LANCZOS)
    im.quantize(colors=256, method=Image.Quantize.FASTOCTREE).save(dst / p.name, optimize=True)
    print(dst / p.name, (dst / p.name).stat().st_size // 1024, "KiB")
