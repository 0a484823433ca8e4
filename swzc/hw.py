"""Hardware models: one TOML per GPU under hwmodels/, loaded into a frozen, validated record."""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass, fields
from importlib import resources

from swzc.errors import SwzcError

DISPATCH_POLICIES = ("round-robin-gpc", "chiplet-round-robin", "linear")


@dataclass(frozen=True)
class HardwareModel:
    name: str
    vendor: str  # "nvidia" or "amd"
    arch: str  # compiler target, e.g. sm_90, gfx942
    compute_units: int  # SMs or CUs
    l2_bytes: int  # total L2 over all partitions
    l2_partitions: int
    l2_line_bytes: int
    chiplets: int  # dies with a private L2 that blocks are dealt to round-robin (AMD XCDs); 1 if monolithic
    dispatch: str
    dram_bytes_per_s: float

    def __post_init__(self) -> None:
        if self.vendor not in ("nvidia", "amd"):
            raise ValueError(f"vendor must be 'nvidia' or 'amd', not {self.vendor!r}")
        for name in ("compute_units", "l2_bytes", "l2_partitions", "l2_line_bytes", "chiplets"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, not {value!r}")
        if self.dispatch not in DISPATCH_POLICIES:
            raise ValueError(f"dispatch must be one of {', '.join(DISPATCH_POLICIES)}, not {self.dispatch!r}")
        bandwidth = self.dram_bytes_per_s
        if isinstance(bandwidth, bool) or not isinstance(bandwidth, (int, float)) or not 0 < bandwidth < math.inf:
            raise ValueError(f"dram_bytes_per_s must be a positive number, not {self.dram_bytes_per_s!r}")


def available() -> list[str]:
    return sorted(p.name.removesuffix(".toml") for p in resources.files("swzc.hwmodels").iterdir() if p.name.endswith(".toml"))


def parse_model(text: str, origin: str) -> HardwareModel:
    try:
        raw = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SwzcError(f"{origin}: not valid TOML: {exc}") from None
    wanted = {f.name for f in fields(HardwareModel)}
    missing = sorted(wanted - raw.keys())
    unknown = sorted(raw.keys() - wanted)
    if missing:
        raise SwzcError(f"{origin}: missing {', '.join(missing)}")
    if unknown:
        raise SwzcError(f"{origin}: unknown key(s) {', '.join(unknown)}")
    for name in ("name", "vendor", "arch", "dispatch"):
        if not isinstance(raw[name], str):
            raise SwzcError(f"{origin}: {name} must be a string")
    try:
        return HardwareModel(**raw)
    except ValueError as exc:
        raise SwzcError(f"{origin}: {exc}") from None


def load(name: str) -> HardwareModel:
    """A bundled model by name (h200, mi300x, …)."""
    names = available()
    if name not in names:
        raise SwzcError(f"unknown hardware model {name!r}; known: {', '.join(names)}")
    text = resources.files("swzc.hwmodels").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_model(text, f"hwmodels/{name}.toml")
