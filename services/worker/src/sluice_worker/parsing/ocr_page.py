"""One page through RapidOCR at the resolution OCR needs, in bounded memory. Runs inside the sandbox.

RapidOCR's own call runs its text detector (a DBNet) on the whole page at up to 2,000 pixels
a side, and the detector's memory grows with the pixels it sees: a 1,700 x 2,200 scan took
~0.9 GB resident (1.6 GB of address space) for detection alone. Detection does not need that
resolution; recognition, which reads each line at 48 pixels high, is what needs the detail.
So a page is read in two steps:

1. **Detection** on the page scaled to `DETECTION_DPI` (150 dpi: the strokes of 7 pt text
   stay apart). A page's resolution is taken from the file when it states a plausible one,
   else estimated from its short side as if it were an A4 page (a 1,700 x 2,200 scan reads as
   ~205 dpi and is detected at 1,240 x 1,600). A page still larger than `DETECTION_TILE_PIXELS`
   at that scale (a large-format scan, a long strip) is detected in full-width bands that
   overlap by `BAND_OVERLAP` pixels; each line is kept from the one band whose middle part
   holds its centre, so a line up to `BAND_OVERLAP` pixels tall is found whole, once.
2. **Recognition** of each line cut from the full-resolution page, one line at a time (in
   batches of six, the recognizer padded every line to the widest and took 2-3 times the CPU).

Measured on a 1,700 x 2,200 page of 38 lines of Chinese (2 cores, shared; one process that
loads the models and reads the page): peak resident memory 677 → 511-545 MB, CPU 41 → 20-25 s
(detection 8 → 2.7 s), the same text. In a sandbox that has parsed other documents the peak
stays near 0.9 GB (the sandbox's own ~0.3 GB besides), and its address space near 1.6 GB:
what made that page readable is the memory limit measuring resident memory (sandbox.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    from PIL import Image
    from rapidocr_onnxruntime import RapidOCR

# A text line's box: four [x, y] points.
Quad = list[list[float]]

# Detection sees the page at this resolution.
DETECTION_DPI = 150
# Resolutions outside this range in a file's header are taken for defaults, not for a scan's.
PLAUSIBLE_DPI = (100, 2400)
# The short side of an A4 page, in inches: the estimate for a page that states no resolution.
PAGE_SHORT_SIDE_INCHES = 8.27
# The detector sees at most this many pixels at once; a larger page is detected in bands.
DETECTION_TILE_PIXELS = 2_500_000
# Overlap of two bands, in detection pixels: the tallest line sure to be found whole.
BAND_OVERLAP = 128


def page_dpi(image: Image.Image) -> float:
    """The page's resolution: as stated in the file when plausible, else estimated."""
    stated = image.info.get("dpi")
    try:
        dpi = float(min(stated)) if stated else 0.0
    except (TypeError, ValueError):
        dpi = 0.0
    if PLAUSIBLE_DPI[0] <= dpi <= PLAUSIBLE_DPI[1]:
        return dpi
    return min(image.width, image.height) / PAGE_SHORT_SIDE_INCHES


def detection_scale(image: Image.Image) -> float:
    return min(1.0, DETECTION_DPI / max(1.0, page_dpi(image)))


def read_page(engine: RapidOCR, image: Image.Image) -> list[tuple[Quad, str, float]]:
    """RapidOCR's result for a Pillow image: (box as four [x, y] points, text, score) per line,
    in full-resolution page coordinates."""
    import numpy as np
    from PIL import Image

    page = np.asarray(image.convert("RGB"))
    scale = detection_scale(image)
    height, width = page.shape[:2]
    if scale >= 1.0 and height * width <= DETECTION_TILE_PIXELS:
        result, _ = engine(page, use_cls=False)  # small enough as it is: RapidOCR's own path
        return list(result or [])
    if scale < 1.0:
        small = image.convert("RGB").resize(
            (max(1, round(width * scale)), max(1, round(height * scale))), Image.Resampling.BILINEAR
        )
        detection = np.asarray(small)
    else:
        detection = page
    boxes = [np.asarray(box, dtype=np.float32) / scale for box in _detect(engine, detection)]
    if not boxes:
        return []
    boxes = engine.sorted_boxes(np.array(boxes, dtype=np.float32))
    lines = engine.get_crop_img_list(page, boxes)
    recognized, _ = engine.text_rec(lines)
    return [
        (box.tolist(), line[0], float(line[1]))
        for box, line in zip(boxes, recognized)
        if line[0] and float(line[1]) >= engine.text_score
    ]


def _detect(engine: RapidOCR, array: np.ndarray) -> list[np.ndarray]:
    """Line boxes (four points each) found in `array`, in its coordinates; by bands when it is
    larger than one tile."""
    height, width = array.shape[:2]
    if height * width <= DETECTION_TILE_PIXELS:
        found, _ = engine.text_det(array)
        return [] if found is None else list(found)
    band = max(4 * BAND_OVERLAP, DETECTION_TILE_PIXELS // width)
    step = band - BAND_OVERLAP
    boxes: list[np.ndarray] = []
    top = 0
    while True:
        last = top + band >= height
        found, _ = engine.text_det(array[top : top + band])
        # This band's own part: from the middle of the overlap above to the middle of the one below.
        low = top + BAND_OVERLAP / 2 if top else 0
        high = height if last else top + band - BAND_OVERLAP / 2
        for box in [] if found is None else found:
            box = box.copy()
            box[:, 1] += top
            if low <= float(box[:, 1].mean()) < high:
                boxes.append(box)
        if last:
            return boxes
        top += step
