#!/usr/bin/python3
"""Renders the ten digits in Debian's handwriting fonts as a test set for `lenet5 classify`.

Each image is one digit drawn with varied size, stroke width, slant, rotation, position, canvas
size and polarity (dark ink on light paper, or light on dark); half are "photo-like": uneven
lighting, paper texture and sensor noise, sometimes specks beside the digit or a colour tint,
a little blur, and JPEG compression. The set is deterministic given --seed.

    scripts/setup.sh --handwriting --no-data      # the fonts, Pillow and NumPy
    scripts/make_handwriting_set.py               # 1800 images into data/handwriting/
    scripts/handwriting_accuracy.sh CHECKPOINT    # how well a checkpoint reads them

Writes DIR/NNNN_D.png (or .jpg), D the true digit, and DIR/labels.csv with one row per image:
the digit and the categories scripts/handwriting_accuracy.sh reports (font family and face,
polarity, clean or photo, size, stroke) plus the drawing parameters. The interpreter is Debian's
python3, the one python3-pil and python3-numpy install into.
"""
import argparse
import csv
import math
import os
import subprocess
import sys

try:
    import numpy as np
    from PIL import Image, ImageDraw, ImageFilter, ImageFont
except ImportError as e:
    sys.exit(f"make_handwriting_set: {e}: run scripts/setup.sh --handwriting "
             "(python3-pil, python3-numpy and the fonts)")

# Font families as fontconfig names them, and the Debian package that ships each. A family is
# a category of the report; its faces are drawn in turn. femkeklaver's digits are hollow
# outlines with hatching, lettering rather than handwriting, so it is left out unless asked for.
FAMILIES = [
    ("bwht", "fonts-bwht", ["Because We Build", "Because We Connect", "Because We Create",
                            "Because We Learn", "Because We Mentor", "Because We Organize"]),
    ("dkg", "fonts-dkg-handwriting", ["DkgHandwriting"]),
    ("breip", "fonts-breip", ["Breip"]),
    ("rufscript", "fonts-rufscript", ["Rufscript"]),
    ("klee", "fonts-klee", ["Klee One"]),
]
OUTLINE_FAMILIES = [("femkeklaver", "fonts-femkeklaver", ["femkeklaver"])]

# Glyphs are drawn this tall (px), shaped there, then scaled to the sampled height, so that
# stroke changes, shear and rotation are anti-aliased by the final downscale.
WORK_HEIGHT = 400

# Final glyph heights (px) for each size category; MNIST's digits are 20 px.
SIZES = {"small": (9, 19), "medium": (20, 64), "large": (65, 220)}
SIZE_WEIGHTS = {"small": 0.3, "medium": 0.4, "large": 0.3}

# Stroke width as a fraction of the glyph height. MNIST's strokes are about 2.5 px in a 20 px
# digit (0.12); the fonts range from 0.04 (Breip, Klee Regular) to 0.15 (Because We Learn).
STROKES = {"thin": (0.02, 0.045), "regular": None, "bold": (0.14, 0.22)}
STROKE_WEIGHTS = {"thin": 0.25, "regular": 0.5, "bold": 0.25}


def font_faces(include_outline):
    """{family: [(face name, file)]} from fc-list; exits naming the missing package."""
    try:
        listing = subprocess.run(["fc-list", "--format", "%{family}|%{style}|%{file}\n"],
                                 check=True, capture_output=True, text=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        sys.exit(f"make_handwriting_set: fc-list failed ({e}): run scripts/setup.sh --handwriting")
    rows = [line.split("|") for line in listing.splitlines() if line.count("|") == 2]
    families = FAMILIES + (OUTLINE_FAMILIES if include_outline else [])
    faces = {}
    for label, package, names in families:
        found = {}
        # Sorted by path so that of two files of one face (Breip ships two versions of its
        # font) the same one is drawn on every machine.
        for family, style, path in sorted(rows, key=lambda row: row[2]):
            if family.split(",")[0] in names:
                face = f"{family.split(',')[0]} {style.split(',')[0]}".replace(" ", "")
                found.setdefault(face, path)
        if not found:
            sys.exit(f"make_handwriting_set: no font of {label} found: install {package} "
                     "(scripts/setup.sh --handwriting)")
        faces[label] = sorted(found.items())
    return faces


def stroke_width_estimate(mask):
    """Mean stroke width (px) of a binary mask: twice the area over the boundary length."""
    inner = mask[1:-1, 1:-1]
    edge = inner & ~(mask[:-2, 1:-1] & mask[2:, 1:-1] & mask[1:-1, :-2] & mask[1:-1, 2:])
    return 2.0 * inner.sum() / max(1, edge.sum())


def repeat_filter(image, filter_class, times):
    """Dilation (MaxFilter) or erosion (MinFilter) by `times` px with a 3x3 square."""
    for _ in range(times):
        image = image.filter(filter_class(3))
    return image


def draw_glyph(font_path, digit, stroke_category, final_height, rng):
    """The digit as an 8-bit coverage image (255 = ink), WORK_HEIGHT tall, stroke adjusted."""
    font = ImageFont.truetype(font_path, WORK_HEIGHT)
    left, top, right, bottom = font.getbbox(str(digit))
    font = ImageFont.truetype(font_path, int(WORK_HEIGHT * WORK_HEIGHT / max(1, bottom - top)))
    left, top, right, bottom = font.getbbox(str(digit))
    pad = WORK_HEIGHT // 4
    size = (right - left + 2 * pad, bottom - top + 2 * pad)

    def draw(stroke_width):
        glyph = Image.new("L", size, 0)
        ImageDraw.Draw(glyph).text((pad - left, pad - top), str(digit), font=font, fill=255,
                                   stroke_width=stroke_width, stroke_fill=255)
        return glyph

    glyph = draw(0)
    width = stroke_width_estimate(np.asarray(glyph) > 127)
    target = STROKES[stroke_category]
    wanted = width if target is None else rng.uniform(*target) * WORK_HEIGHT
    # A pen leaves a line at least about a pixel wide in the picture, however small the digit.
    wanted = max(wanted, rng.uniform(0.8, 1.3) * WORK_HEIGHT / final_height)
    change = int(round((wanted - width) / 2))  # px per side
    if change > 0:
        return draw(change)
    return thinned(glyph, min(-change, int(width / 4)))


def thinned(glyph, steps):
    """Erodes by up to `steps` px, stopping before a hairline of the font (Rufscript's, Dkg's
    oblique faces') would vanish: an erosion that dilation cannot undo within 3% of the area has
    removed a part of the digit, not thinned it."""
    area = np.count_nonzero(np.asarray(glyph) > 127)
    eroded = glyph
    for k in range(1, steps + 1):
        candidate = eroded.filter(ImageFilter.MinFilter(3))
        restored = repeat_filter(candidate, ImageFilter.MaxFilter, k)
        if np.count_nonzero(np.asarray(restored) > 127) < 0.97 * area:
            break
        eroded = candidate
    return eroded


def slant_and_rotate(glyph, shear, degrees):
    """Shears x by `shear` per px of height (italic for shear > 0), then rotates."""
    w, h = glyph.size
    # Image.transform maps output to input: x_in = x_out + shear * (y_out - h/2) before rotation.
    widened = Image.new("L", (w + int(abs(shear) * h) + 2, h), 0)
    widened.paste(glyph, (int(abs(shear) * h / 2) + 1, 0))
    sheared = widened.transform(widened.size, Image.AFFINE,
                                (1, shear, -shear * h / 2, 0, 1, 0), resample=Image.BICUBIC)
    rotated = sheared.rotate(degrees, resample=Image.BICUBIC, expand=True)
    box = rotated.getbbox()
    return rotated.crop(box) if box else rotated


def sample_category(rng, weights):
    names = list(weights)
    return names[rng.choice(len(names), p=[weights[n] for n in names])]


def smooth_noise(rng, height, width, cells):
    """Noise in [-1, 1] that varies over about width/cells px: a coarse grid upsampled."""
    grid = rng.uniform(-1, 1, size=(cells + 1, cells + 1)).astype(np.float32)
    image = Image.fromarray(grid, mode="F").resize((width, height), Image.BICUBIC)
    return np.clip(np.asarray(image), -1, 1)


def lighting(rng, height, width):
    """A multiplicative illumination field: a linear shadow across the sheet and a vignette."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    angle = rng.uniform(0, 2 * math.pi)
    ramp = (x / width - 0.5) * math.cos(angle) + (y / height - 0.5) * math.sin(angle)
    ramp = (ramp - ramp.min()) / max(1e-6, ramp.max() - ramp.min())
    darkest = rng.uniform(0.45, 0.85)
    field = 1.0 - (1.0 - darkest) * ramp
    cx, cy = rng.uniform(0.2, 0.8) * width, rng.uniform(0.2, 0.8) * height
    r2 = ((x - cx) / width) ** 2 + ((y - cy) / height) ** 2
    return field * (1.0 - rng.uniform(0.0, 0.35) * np.clip(r2 / 0.5, 0, 1))


def add_specks(rng, canvas, ink_mask, ink_level, digit_height):
    """A few dots and short scratches away from the digit, as dust and stray pen marks leave."""
    h, w = canvas.shape
    dilated = np.asarray(Image.fromarray(ink_mask.astype(np.uint8) * 255)
                         .filter(ImageFilter.MaxFilter(9))) > 0
    wanted, count = int(rng.integers(2, 7)), 0
    for _ in range(60):  # tries: a spot that touches the digit is skipped
        if count == wanted:
            break
        x, y = int(rng.integers(0, w)), int(rng.integers(0, h))
        size = max(1, int(rng.uniform(0.04, 0.12) * digit_height))
        y0, y1, x0, x1 = y, min(h, y + size), x, min(w, x + size)
        if rng.random() < 0.4:  # a scratch: long and thin
            x1 = min(w, x + size * int(rng.integers(2, 5)))
            y1 = min(h, y + max(1, size // 3))
        if dilated[max(0, y0 - 2):y1 + 2, max(0, x0 - 2):x1 + 2].any():
            continue
        strength = rng.uniform(0.5, 1.0)
        canvas[y0:y1, x0:x1] = (1 - strength) * canvas[y0:y1, x0:x1] + strength * ink_level
        count += 1
    return count


def compose(rng, glyph_alpha, polarity, photo):
    """Places the glyph on a canvas; returns (grey or RGB PIL image, description dict)."""
    gh, gw = glyph_alpha.shape
    margins = [int(rng.uniform(0.1, 1.6) * max(gh, 8)) + 1 for _ in range(4)]  # l, t, r, b
    height, width = gh + margins[1] + margins[3], gw + margins[0] + margins[2]
    alpha = np.zeros((height, width), np.float32)
    alpha[margins[1]:margins[1] + gh, margins[0]:margins[0] + gw] = glyph_alpha
    if polarity == "dark-on-light":
        paper, ink = rng.uniform(0.7, 1.0), rng.uniform(0.0, 0.35)
    else:
        paper, ink = rng.uniform(0.0, 0.28), rng.uniform(0.65, 1.0)
    canvas = paper + (ink - paper) * alpha
    info = {"canvas": f"{width}x{height}", "specks": 0, "jpeg_quality": "", "colour": "no"}
    if not photo:
        return Image.fromarray(np.clip(canvas * 255 + 0.5, 0, 255).astype(np.uint8)), info
    canvas = canvas * (1.0 + rng.uniform(0.03, 0.1) * smooth_noise(rng, height, width, 6))
    if rng.random() < 0.5:
        info["specks"] = add_specks(rng, canvas, alpha > 0.5, ink, gh)
    canvas = canvas * lighting(rng, height, width)
    if polarity == "light-on-dark" and rng.random() < 0.5:  # glare on a board or screen
        canvas = canvas + rng.uniform(0.05, 0.2) * (1 + smooth_noise(rng, height, width, 2)) / 2
    canvas = canvas + rng.normal(0, rng.uniform(0.005, 0.04), size=canvas.shape)
    image = Image.fromarray(np.clip(canvas * 255 + 0.5, 0, 255).astype(np.uint8))
    blur = min(rng.uniform(0.0, 1.5), gh / 15)
    image = image.filter(ImageFilter.GaussianBlur(blur))
    if rng.random() < 0.3:  # blue or black ballpoint on cream paper, photographed in colour
        tint = np.array([rng.uniform(0.8, 1.0), rng.uniform(0.85, 1.0), rng.uniform(0.7, 1.05)])
        grey = np.asarray(image, np.float32)[..., None]
        image = Image.fromarray(np.clip(grey * tint, 0, 255).astype(np.uint8), mode="RGB")
        info["colour"] = "yes"
    return image, info


def render(rng, face_path, digit, size_category, stroke_category, polarity, photo):
    height = int(rng.integers(*SIZES[size_category], endpoint=True))
    glyph = draw_glyph(face_path, digit, stroke_category, height, rng)
    shear = rng.uniform(-0.35, 0.35)
    degrees = rng.uniform(-15, 15)
    glyph = slant_and_rotate(glyph, shear, degrees)
    # The height of the upright glyph: the sheared and rotated box is a little taller.
    width = max(1, round(glyph.size[0] * height / glyph.size[1]))
    small = glyph.resize((width, height), Image.LANCZOS, reducing_gap=3.0)
    alpha = np.asarray(small, np.float32) / 255.0
    image, info = compose(rng, np.clip(alpha, 0, 1), polarity, photo)
    info.update(slant=f"{shear:.2f}", rotation=f"{degrees:.1f}", glyph_height=height)
    return image, info


def glyph_alpha(path, digit, stroke, height, rng):
    """The digit upright, `height` px tall, as coverage in [0, 1]."""
    glyph = draw_glyph(path, digit, stroke, height, rng)
    box = glyph.getbbox()
    glyph = glyph.crop(box)
    width = max(1, round(glyph.size[0] * height / glyph.size[1]))
    return np.asarray(glyph.resize((width, height), Image.LANCZOS), np.float32) / 255.0


def on_paper(alpha, size, at, paper, ink):
    """A size (w, h) canvas of `paper` with the glyph's ink drawn with its top-left at `at`."""
    canvas = np.full((size[1], size[0]), paper, np.float32)
    h, w = alpha.shape
    region = canvas[at[1]:at[1] + h, at[0]:at[0] + w]
    region += (ink - paper) * alpha
    return canvas


def to_image(canvas):
    return Image.fromarray(np.clip(canvas * 255 + 0.5, 0, 255).astype(np.uint8))


def write_fixtures(out, faces):
    """The small images of tests/data: one "5", clean and with each difficulty that the
    preprocessing handles, so a test can compare each result with the clean one's."""
    path = dict(faces["dkg"])["DkgHandwritingRoman"]
    rng = np.random.default_rng(5)
    five = glyph_alpha(path, 5, "regular", 40, rng)
    h, w = five.shape
    at = ((64 - w) // 2, (64 - h) // 2)
    clean = on_paper(five, (64, 64), at, 0.92, 0.1)
    images = {"five_clean.png": to_image(clean)}
    # A shadow across the sheet: the paper falls from 0.92 to 0.28 of full white, so that on the
    # dark side it is darker than halfway from the lit paper to the ink.
    shade = lighting_ramp(64, 64, 0.3)
    images["five_uneven_light.png"] = to_image(clean * shade)
    # A fine pen at a large size: strokes about 1.5 px in a 120 px digit (MNIST: 2.5 in 20).
    thin = glyph_alpha(path, 5, "thin", 120, np.random.default_rng(5))
    images["five_thin.png"] = to_image(on_paper(thin, (150, 150), (40, 15), 0.92, 0.1))
    # Small and off-centre in a noisy photo: 10 px tall.
    small = glyph_alpha(path, 5, "regular", 10, rng)
    noisy = on_paper(small, (64, 64), (8, 40), 0.85, 0.2) + rng.normal(0, 0.02, (64, 64))
    images["five_small.png"] = to_image(noisy)
    # Specks and a scratch away from the digit, on slightly noisy paper: the clean digit on a
    # larger sheet, the marks 15 px or more from it.
    specked = on_paper(five, (96, 96), (at[0] + 16, at[1] + 16), 0.92, 0.1)
    specked += rng.normal(0, 0.01, specked.shape)
    for x0, y0, x1, y1 in [(3, 3, 7, 7), (86, 10, 90, 13), (4, 86, 22, 88), (85, 85, 89, 89)]:
        specked[y0:y1, x0:x1] = 0.15
    images["five_specks.png"] = to_image(specked)
    # Light chalk on a dark board, lit unevenly, blurred and saved as a JPEG.
    board = on_paper(five, (64, 64), at, 0.15, 0.85) * lighting_ramp(64, 64, 0.5)
    board = board + rng.normal(0, 0.02, board.shape)
    images["five_light_on_dark.jpg"] = to_image(board).filter(ImageFilter.GaussianBlur(0.7))
    os.makedirs(out, exist_ok=True)
    for name, image in images.items():
        options = {"quality": 70} if name.endswith(".jpg") else {"optimize": True}
        image.save(os.path.join(out, name), **options)
    print(f"make_handwriting_set: {len(images)} fixtures in {out}", file=sys.stderr)


def lighting_ramp(height, width, darkest):
    """Illumination falling linearly from 1 at the top-left corner to `darkest` at the other."""
    y, x = np.mgrid[0:height, 0:width].astype(np.float32)
    return 1.0 - (1.0 - darkest) * (x / (width - 1) + y / (height - 1)) / 2


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default="data/handwriting", help="output folder")
    parser.add_argument("--count", type=int, default=1800, help="number of images")
    parser.add_argument("--seed", type=int, default=1, help="seed of every random choice")
    parser.add_argument("--include-outline", action="store_true",
                        help="also draw femkeklaver's hollow outline digits")
    parser.add_argument("--fixtures", metavar="DIR",
                        help="instead, write the test images of tests/data into DIR")
    args = parser.parse_args()
    if args.fixtures:
        write_fixtures(args.fixtures, font_faces(False))
        return
    if args.count < 1:
        parser.error("--count must be at least 1")

    faces = font_faces(args.include_outline)
    families = sorted(faces)
    os.makedirs(args.out, exist_ok=True)
    rows = []
    for i in range(args.count):
        rng = np.random.default_rng([args.seed, i])
        # Digits cycle fastest, then families, so every family draws every digit equally often.
        digit = i % 10
        family = families[(i // 10) % len(families)]
        face, path = faces[family][int(rng.integers(len(faces[family])))]
        size = sample_category(rng, SIZE_WEIGHTS)
        stroke = sample_category(rng, STROKE_WEIGHTS)
        polarity = "dark-on-light" if rng.random() < 0.65 else "light-on-dark"
        photo = rng.random() < 0.5
        image, info = render(rng, path, digit, size, stroke, polarity, photo)
        if photo:
            quality = int(rng.integers(20, 90))
            name = f"{i:04d}_{digit}.jpg"
            image.save(os.path.join(args.out, name), quality=quality)
            info["jpeg_quality"] = quality
        else:
            name = f"{i:04d}_{digit}.png"
            image.save(os.path.join(args.out, name))
        rows.append(dict(file=name, digit=digit, family=family, face=face, polarity=polarity,
                         style="photo" if photo else "clean", size=size, stroke=stroke, **info))
    with open(os.path.join(args.out, "labels.csv"), "w", newline="") as out:
        writer = csv.DictWriter(out, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    print(f"make_handwriting_set: {len(rows)} images of {len(families)} font families "
          f"in {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
