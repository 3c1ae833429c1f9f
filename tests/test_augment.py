"""Deep Image augmentations (lab.augment): shape, dtype, seeded determinism, identity settings,
parameter checks, Table 1's counts from the grids, batched == per-image, the throughput bench."""
import pytest
import torch

from lab import augment
from lab.augment import (OPS, color_cast, color_casting, cropping, deep_image_augment, distortion, flip, flipping,
                         lens_distortion, random_crop, rotate, rotating, sample_params, table1_counts, vignette,
                         vignetting)
from lab.augment.pipeline import apply_op, apply_params


def images(n=3, c=3, h=24, w=20, dtype=torch.uint8, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randint(0, 256, (n, c, h, w), dtype=torch.uint8, generator=g)
    return x if dtype == torch.uint8 else (x.to(dtype) / 255)


# each op: (name, seeded call, identity call, an out-of-range call)
OPS_UNDER_TEST = [
    ("color_cast", lambda x, s: color_cast(x, seed=s), lambda x: color_cast(x, shifts=[0, 0, 0]),
     lambda x: color_cast(x, shifts=[0, 21, 0])),
    ("vignette", lambda x, s: vignette(x, seed=s), lambda x: vignette(x, area=0.5, strength=0.0),
     lambda x: vignette(x, area=0.5, strength=1.5)),
    ("lens_distortion", lambda x, s: lens_distortion(x, seed=s), lambda x: lens_distortion(x, kind="barrel", degree=0),
     lambda x: lens_distortion(x, kind="barrel", degree=2.0)),
    ("rotation", lambda x, s: rotate(x, seed=s), lambda x: rotate(x, degrees=0), lambda x: rotate(x, degrees=200)),
    ("flip", lambda x, s: flip(x, seed=s), lambda x: flip(x, flips=False), lambda x: flip(x, flips=torch.ones(2))),
    ("crop", lambda x, s: random_crop(x, 16, seed=s), lambda x: random_crop(x, tuple(x.shape[2:]), top=0, left=0),
     lambda x: random_crop(x, 16, top=0, left=99)),
]


@pytest.mark.parametrize("name, seeded, identity, bad", OPS_UNDER_TEST, ids=[o[0] for o in OPS_UNDER_TEST])
@pytest.mark.parametrize("dtype", [torch.uint8, torch.float32])
def test_shape_dtype_determinism_identity(name, seeded, identity, bad, dtype):
    x = images(n=8, dtype=dtype)
    y = seeded(x, 7)
    expected = (8, 3, 16, 16) if name == "crop" else tuple(x.shape)
    assert tuple(y.shape) == expected and y.dtype == dtype and y.device == x.device
    assert torch.equal(y, seeded(x, 7))                      # same seed, same result
    assert not torch.equal(seeded(x, 7), seeded(x, 8))         # another seed, another draw
    if dtype == torch.float32:
        assert float(y.min()) >= 0.0 and float(y.max()) <= 1.0
    assert torch.equal(identity(x), x)                        # the identity setting changes nothing
    with pytest.raises(ValueError):
        bad(x)


def test_seed_from_generator_and_checks():
    x = images()
    assert torch.equal(color_cast(x, gen=torch.Generator().manual_seed(3)), color_cast(x, seed=3))
    with pytest.raises(ValueError, match="seed"):
        color_cast(x, seed=-1)
    with pytest.raises(ValueError, match="not both"):
        color_cast(x, seed=1, gen=torch.Generator())
    with pytest.raises(ValueError, match=r"\(N, C, H, W\)"):
        vignette(x[0], seed=0)
    with pytest.raises(ValueError, match="uint8"):
        flip(x.to(torch.int32), seed=0)
    with pytest.raises(ValueError, match="barrel, pincushion"):
        lens_distortion(x, kind="fisheye", degree=0.1)
    with pytest.raises(ValueError, match="larger than"):
        random_crop(x, 64, seed=0)
    with pytest.raises(ValueError, match="allowed: crop, color_cast"):
        deep_image_augment(x, 16, ops=["blur"], seed=0)


def test_color_cast_adds_and_clamps():
    x = torch.tensor([[[[0, 250]], [[100, 100]], [[7, 9]]]], dtype=torch.uint8)  # (1, 3, 1, 2)
    y = color_cast(x, shifts=[-20, 5, 20])
    assert y[0, :, 0].tolist() == [[0, 230], [105, 105], [27, 29]]
    f = color_cast(x.float() / 255, shifts=[-20, 5, 20])
    assert torch.allclose(f * 255, y.float(), atol=1e-4)
    s = color_casting.sample(2000, 3, gen=torch.Generator().manual_seed(0))
    assert s.min() >= -20 and s.max() <= 20
    assert 0.4 < float((s == 0).float().mean()) < 0.6  # half the channels unaltered (+ shift 0 draws)


def test_vignette_centre_and_corners():
    x = torch.full((1, 3, 33, 33), 200, dtype=torch.uint8)
    y = vignette(x, area=1.0, strength=0.5)
    assert int(y[0, 0, 16, 16]) == 200                      # the centre keeps its brightness
    assert 100 <= int(y[0, 0, 0, 0]) < 110                  # the corners lose about half
    assert int(vignette(x, area=0.2, strength=0.9)[0, 0, 16, 8]) == 200  # outside the ring: untouched


def test_rotation_direction_and_flip():
    x = images(n=2, h=6, w=6)
    assert torch.equal(rotate(x, degrees=90), torch.rot90(x, 1, dims=(2, 3)))  # counter-clockwise
    assert torch.equal(flip(x, flips=True), x.flip(-1))
    assert torch.equal(flip(x, flips=torch.tensor([True, False]))[1], x[1])


def test_lens_distortion_stays_inside_and_types_differ():
    g = distortion.grid(32, 32, torch.tensor([max(distortion.DEGREES), -max(distortion.DEGREES)]))
    assert float(g.abs().max()) <= 1.0  # no sample outside the crop for the drawn degrees
    x = images(n=1, h=32, w=32)
    assert not torch.equal(lens_distortion(x, kind="barrel", degree=0.2), lens_distortion(x, kind="pincushion",
                                                                                         degree=0.2))


def test_crop_matches_slicing():
    x = images(n=2, h=12, w=10)
    y = random_crop(x, (5, 4), top=[1, 7], left=[0, 6])
    assert torch.equal(y[0], x[0, :, 1:6, 0:4]) and torch.equal(y[1], x[1, :, 7:12, 6:10])
    top, left = cropping.sample(5000, (12, 10), (5, 4), gen=torch.Generator().manual_seed(0))
    assert set(top.tolist()) == set(range(7)) and set(left.tolist()) == set(range(6))  # randint(0, H - h)


def test_table1_counts_match_the_paper():
    df = table1_counts()
    counts = dict(zip(df["augmentation"], df["possible_changes"]))
    assert counts["color_cast"] == 68920 and counts["vignette"] == 1960 and counts["lens_distortion"] == 260
    assert counts["rotation"] == 20 and counts["flip"] == 2 and counts["crop"] == 82944
    assert df["matches"].iloc[:6].all()
    assert counts["all (product)"] == 68920 * 1960 * 260 * 20 * 2 * 82944
    assert cropping.count(256, 224) == 32 * 32 and cropping.count(224, 224) == 1


def test_counts_follow_the_grids(monkeypatch):
    monkeypatch.setattr(color_casting, "SHIFTS", tuple(range(-10, 11)))
    monkeypatch.setattr(vignetting, "STRENGTHS", (0.1, 0.2))
    monkeypatch.setattr(distortion, "DEGREES", (0.1,))
    monkeypatch.setattr(rotating, "ANGLES", (-5, 5))
    monkeypatch.setattr(flipping, "FLIPS", (False,))
    counts = dict(zip(*table1_counts(channels=3)[["augmentation", "possible_changes"]].T.values))
    assert counts["color_cast"] == 21 ** 3 - 1 and counts["vignette"] == 40 * 2
    assert counts["lens_distortion"] == 2 and counts["rotation"] == 2 and counts["flip"] == 1
    assert counts["color_cast"] == augment.MODULES["color_cast"].count()
    # the draws use the same grids
    assert set(rotating.sample(200, gen=torch.Generator().manual_seed(0)).tolist()) == {-5.0, 5.0}


def test_pipeline_batched_equals_per_image_and_is_seeded():
    x = images(n=5, h=40, w=40)
    y = deep_image_augment(x, 32, seed=11)
    assert y.shape == (5, 3, 32, 32) and y.dtype == torch.uint8
    assert torch.equal(y, deep_image_augment(x, 32, seed=11))
    params = sample_params(5, 3, (40, 40), 32, gen=torch.Generator().manual_seed(2), p=1.0)
    batched = apply_params(x, params, 32)
    loop = torch.cat([apply_params(x[i:i + 1], params[i], 32) for i in range(5)])
    assert torch.equal(batched, loop)
    for op in OPS:  # every op alone, too
        src = x if op == "crop" else x[:, :, :32, :32]
        assert torch.equal(apply_op(op, src, params, 32),
                           torch.cat([apply_op(op, src[i:i + 1], params[i], 32) for i in range(5)]))
    assert torch.equal(deep_image_augment(x, 32, ops=[], seed=0), x)


def test_settings_preview_applies_the_chosen_parameters_in_pipeline_order():
    from lab.experiments import augmentation_settings
    from lab.experiments.deep_image import test_card

    img = test_card(64)
    same = augmentation_settings(img, crop_size=48)
    assert all(torch.equal(p, same.panels["crop"]) for p in same.panels.values())  # zeros: identity
    kw = dict(shifts=(10, -5, 0), area=0.5, strength=0.6, kind="pincushion", degree=0.2, angle=15.0, flipped=True)
    pv = augmentation_settings(img, crop_size=48, top=3, left=5, **kw)
    crop = img[:, :, 3:51, 5:53]
    assert torch.equal(pv.panels["crop"], crop)
    assert torch.equal(pv.panels["color_cast"], color_cast(crop, shifts=torch.tensor([10, -5, 0])))
    assert torch.equal(pv.panels["rotation"], rotate(crop, degrees=[15.0]))
    want = flip(rotate(lens_distortion(vignette(color_cast(crop, shifts=torch.tensor([10, -5, 0])), area=[0.5],
                                                strength=[0.6]), kind="pincushion", degree=[0.2]), degrees=[15.0]),
                flips=torch.tensor([True]))
    assert torch.equal(pv.panels["all"], want)
    for bad, msg in ((dict(crop_size=65), "crop size must be an int in 1..64"),
                     (dict(shifts=(0, 0)), "one colour-cast offset per channel"),
                     (dict(area=2.0, strength=0.1), "vignette area must lie in"),
                     (dict(angle=181.0), "rotation angle")):
        with pytest.raises(ValueError, match=msg):
            augmentation_settings(img, **bad)


def test_throughput_bench_small(monkeypatch):
    from lab import backend
    from lab.augment.bench import throughput

    monkeypatch.setattr(backend, "versions", lambda: {"torch": torch.__version__})  # skip slow imports

    df, info = throughput(batch=4, image_size=48, crop_size=32, repeats=1, device="cpu")
    assert list(df["op"]) == [*OPS, "all"]
    assert df["same_output"].all() and (df["batched_img_s"] > 0).all() and (df["loop_img_s"] > 0).all()
    assert info["versions"]["torch"] == torch.__version__ and "device" in info
    with pytest.raises(ValueError, match="batch"):
        throughput(batch=0)


@pytest.mark.gpu
def test_gpu_matches_cpu():
    x = images(n=6, h=40, w=40)
    cpu = deep_image_augment(x, 32, seed=5)
    gpu = deep_image_augment(x.cuda(), 32, seed=5)
    assert gpu.device.type == "cuda"
    assert (gpu.cpu().int() - cpu.int()).abs().max() <= 1  # bilinear sampling may round differently


# -- the CLI

def test_cli_augment_counts():
    import json

    from typer.testing import CliRunner

    from lab.cli import app

    runner = CliRunner()
    r = runner.invoke(app, ["augment", "--json"])
    assert r.exit_code == 0, r.output
    rows = {row["augmentation"]: row for row in json.loads(r.stdout)["rows"]}
    assert rows["crop"]["possible_changes"] == 82944 and rows["color_cast"]["matches"] is True
    r = runner.invoke(app, ["augment"])
    assert r.exit_code == 0 and "68920" in r.output
    r = runner.invoke(app, ["augment", "--crop", "600"])
    assert r.exit_code == 2 and "larger than the image" in r.output and "Traceback" not in r.output


def test_cli_bench_augment(tmp_path, monkeypatch):
    import json

    from typer.testing import CliRunner

    from lab import backend
    from lab.cli import app

    monkeypatch.setattr(backend, "versions", lambda: {"torch": torch.__version__})  # skip slow imports
    out = tmp_path / "augment.json"
    r = CliRunner().invoke(app, ["bench", "augment", "--batch", "2", "--image-size", "40", "--crop", "32",
                                 "--repeats", "1", "--device", "cpu", "--out", str(out)])
    assert r.exit_code == 0, r.output
    data = json.loads(out.read_text())
    assert data["versions"]["torch"] == torch.__version__ and len(data["rows"]) == len(OPS) + 1
    assert all(row["same_output"] for row in data["rows"])
    r = CliRunner().invoke(app, ["bench", "augment", "--crop", "999", "--out", str(out)])
    assert r.exit_code == 2 and "crop_size" in r.output
