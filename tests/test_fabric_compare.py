"""bench/l2/fabric.py compare: ncu's raw page read back, and each form's predictions put against it."""

import importlib.util
import json

from support import ROOT

spec = importlib.util.spec_from_file_location("fabric", ROOT / "bench" / "l2" / "fabric.py")
fabric = importlib.util.module_from_spec(spec)
spec.loader.exec_module(fabric)

HEADER = '"ID","Kernel Name","dram__bytes_read.sum","lts__t_sector_hit_rate.pct","lts__t_sectors_srcunit_ltcfabric.sum"'


def page(rows):
    lines = []
    for variant, (dram, hit, across) in rows.items():
        lines += [f"### {variant}", HEADER, '"","","byte","%","sector"', f'"0","k","{dram:,}","{hit}","{across:,}"']
    return "\n".join(lines) + "\n"


def prediction(variant, forms):
    kernel, _, order = variant.partition("__")
    return {"kernel": kernel, "candidate": order, "variant": variant,
            **{form: {"l2_hit_pct": hit, "fabric_sectors": across} for form, (hit, across) in forms.items()}}


def test_each_form_is_put_against_the_measured_fabric_and_hit_rate(tmp_path, monkeypatch):
    monkeypatch.setattr(fabric, "FORMS", {"a": (1, 0.7, 0.4), "b": (4, 0.9, 0.1)})
    csv = tmp_path / "fabric.csv"
    csv.write_text(page({"g__identity": (3_200_000, 60.0, 2_000_000), "g__grouped_8": (320_000, 90.0, 400_000),
                         "g__grouped_4": (640_000, 80.0, 1_000_000)}))
    predicted = tmp_path / "predicted.json"
    predicted.write_text(json.dumps({"command": "predict", "forms": {}, "predictions": [
        prediction("g__identity", {"a": (50.0, 1_000_000), "b": (62.0, 2_000_000)}),
        prediction("g__grouped_8", {"a": (92.0, 200_000), "b": (89.0, 800_000)}),
        prediction("g__grouped_4", {"a": (80.0, 500_000), "b": (80.0, 8_000_000)}),
        prediction("g__missing", {"a": (1.0, 1), "b": (1.0, 1)}),  # not measured: left out
    ]}))
    out = tmp_path / "fabric.md"
    fabric.compare(csv, predicted, out)
    text = out.read_text()
    assert "| g | identity | 2.0 | 1.0 | 0.50 | 2.0 | 1.00 | 60.0 | 50.0 | 62.0 |" in text
    assert "| g | grouped_8 | 0.4 | 0.2 | 0.50 | 0.8 | 2.00 | 90.0 | 92.0 | 89.0 |" in text
    assert "missing" not in text
    # a: off by 2x on all three; b: exact, 2x and 8x off (the median, 2x, not the mean, 4x)
    assert "| a | 3 | 2.00x | 4.0 |" in text
    assert "| b | 3 | 2.00x | 1.0 |" in text
