"""Scanned pages made in the test: text rendered with Pillow, wrapped into PDFs and image files.

English is set in DejaVu Serif (installed with the system). The machines have no CJK font
(`fc-list :lang=zh` is empty), so Chinese is set in WenQuanYi Micro Hei from the PyPI wheel
`paperang-p2-fonts-cjk` (the font file and nothing else; pinned in requirements.lock)."""

from __future__ import annotations

import io
import random
import struct
import zlib

from PIL import Image, ImageDraw, ImageFont

FONT = "/usr/share/fonts/truetype/dejavu/DejaVuSerif.ttf"

PAGE_ONE = [
    "Scanned pages become searchable text in Sluice.",
    "The harbour master recorded forty-two vessels on Tuesday.",
    "Every invoice must be approved by two managers before payment.",
    "Quarterly revenue grew by seven percent in the northern region.",
]
PAGE_TWO = [
    "The lighthouse keeper logged a violent storm at midnight.",
    "Fresh water pumps were repaired before the winter season.",
]
CHINESE_PAGE = [
    "水闸把扫描的页面变成可以搜索的文字。",
    "港务长在星期二记录了四十二艘船只。",
    "每张发票在付款之前必须由两位经理批准。",
    "北部地区的季度收入增长了百分之七。",
]
TEXT_LAYER_PAGE = "This first page has a real text layer about canal locks and sluice gates."
# Lines of a full-size scanned page of Chinese (scanned_chinese_page).
CHINESE_SCAN = [
    "水闸把扫描的页面变成可以搜索的文字，每一页都能找到。",  # noqa: RUF001 - CJK punctuation, meant
    "港务长在星期二记录了四十二艘船只和三艘渔船。",
    "每张发票在付款之前必须由两位经理批准并签字。",
    "北部地区的季度收入增长了百分之七，南部持平。",  # noqa: RUF001 - CJK punctuation, meant
    "灯塔看守人在午夜记录了一场猛烈的风暴和大浪。",
    "淡水泵在冬季来临之前已经全部修好并试运行。",
    "运河的船闸每天早上六点开放，晚上十点关闭。",  # noqa: RUF001 - CJK punctuation, meant
    "仓库管理员每周清点一次库存并提交书面报告。",
    "新来的工程师负责检查闸门的液压系统和电缆。",
    "夏季游客增多时，码头会临时增加两名安全员。",  # noqa: RUF001 - CJK punctuation, meant
]


def cjk_font() -> str:
    from importlib.resources import files

    return str(files("paperang_p2_fonts_cjk") / "fonts" / "wqy-microhei.ttc")


def render_page(
    lines: list[str], *, size=(1654, 2339), font_size: int = 32, rotate: float = 0.0, noise: bool = False, font: str = FONT
) -> Image.Image:
    """A white A4 page at 200 dpi with `lines` in black; optionally rotated and speckled like a photo."""
    image = Image.new("L", size, 255)
    draw = ImageDraw.Draw(image)
    font = ImageFont.truetype(font, font_size)
    y = 150
    for line in lines:
        draw.text((150, y), line, font=font, fill=0)
        y += int(font_size * 1.6)
    if rotate:
        image = image.rotate(rotate, fillcolor=255, resample=Image.BICUBIC)
    if noise:
        rnd = random.Random(7)
        pixels = image.load()
        for _ in range(20000):
            pixels[rnd.randrange(size[0]), rnd.randrange(size[1])] = rnd.randrange(256)
    return image


def scanned_chinese_page(lines: list[str] = CHINESE_SCAN, size=(1700, 2200)) -> bytes:
    """A grayscale PNG the size of a US letter page scanned at 200 dpi, Chinese text on a
    speckled background (like the scanned page of issue 21: 1,700 x 2,200, ~0.5 MB)."""
    return image_bytes(render_page(lines, size=size, font_size=36, noise=True, font=cjk_font()), "PNG")


def scanned_pdf(*pages: list[str], font: str = FONT) -> bytes:
    images = [render_page(lines, font=font) for lines in pages]
    out = io.BytesIO()
    images[0].save(out, "PDF", resolution=200, save_all=True, append_images=images[1:])
    return out.getvalue()


def image_bytes(image: Image.Image, fmt: str, **options) -> bytes:
    out = io.BytesIO()
    image.save(out, fmt, **options)
    return out.getvalue()


def multipage_tiff(*pages: list[str]) -> bytes:
    images = [render_page(lines) for lines in pages]
    out = io.BytesIO()
    images[0].save(out, "TIFF", save_all=True, append_images=images[1:], compression="tiff_deflate")
    return out.getvalue()


def text_layer_pdf_page(text: str) -> bytes:
    """A one-page PDF with `text` in its text layer (Helvetica), written by hand."""
    stream = f"BT /F1 14 Tf 72 760 Td ({text}) Tj ET".encode()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 595 842] /Resources << /Font << /F1 5 0 R >> >> /Contents 4 0 R >>",
        b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    out = io.BytesIO()
    out.write(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref))
    return out.getvalue()


def mixed_pdf() -> bytes:
    """Page 1: a text layer; page 2: a scan of PAGE_ONE."""
    from pypdf import PdfReader, PdfWriter

    writer = PdfWriter()
    for data in (text_layer_pdf_page(TEXT_LAYER_PAGE), scanned_pdf(PAGE_ONE)):
        for page in PdfReader(io.BytesIO(data)).pages:
            writer.add_page(page)
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def pixel_bomb_png(width: int = 60000, height: int = 60000) -> bytes:
    """A PNG of a few hundred bytes whose header declares widthxheight pixels (3.6 gigapixels)."""
    small = image_bytes(Image.new("L", (1, 1), 255), "PNG")
    ihdr_at = small.index(b"IHDR")
    body = bytearray(small[ihdr_at : ihdr_at + 4 + 13])
    body[4:12] = struct.pack(">II", width, height)
    crc = struct.pack(">I", zlib.crc32(bytes(body)) & 0xFFFFFFFF)
    return small[:ihdr_at] + bytes(body) + crc + small[ihdr_at + 4 + 13 + 4 :]


def character_error_rate(expected: str, actual: str) -> float:
    """Levenshtein distance over characters, divided by the expected length."""
    previous = list(range(len(actual) + 1))
    for i, a in enumerate(expected, start=1):
        current = [i]
        for j, b in enumerate(actual, start=1):
            current.append(min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a != b)))
        previous = current
    return previous[-1] / max(1, len(expected))
