"""Device profiles for the roofline model: peak numbers with their sources, plus fitted parameters.

A profile is a JSON data file in ``cost/profiles/`` (or any path given by the user). Peak numbers
(compute, bandwidth, compute units, cache) come from vendor datasheets and each names its source
under ``"sources"``; the per-op-kind parameters (efficiencies, launch overhead, tile size, fill) are
fitted, and ``"calibration"`` says against what. Loading validates every field and names the file
and field on error.

Format::

    {"name": "a100", "description": "...", "device": "gpu",
     "compute_units": 108, "vector_tflops": 19.5, "matrix_tflops": 156.0,
     "bandwidth_gbs": 2039.0, "cache_bytes": 41943040, "cache_bandwidth_gbs": 4000.0,
     "sources": {"vector_tflops": "...", ...}, "calibration": "...",
     "kinds": {"gemm": {"unit": "matrix", "compute_efficiency": 0.5, "bandwidth_efficiency": 0.8,
                        "launch_us": 3.0, "tile_rows": 128, "tile_cols": 64,
                        "fill_waves": 0.5, "depth_overhead": 16.0}, ...}}

``kinds`` needs an entry for every op kind that runs kernels: gemm, conv, elementwise, reduction,
pool, memory (weight transforms on activations are priced as memory).

An optional ``ops`` object overrides the kind's parameters for one op or op variant, where a kind
hides kernels that run very differently: ``"poolmax"``, ``"poolavg"`` (a CPU's max pool and
average pool differ by 3x per window element) or ``"conv2d:depthwise"`` (a depthwise conv runs a
dedicated kernel). Each entry has the same fields as a kind.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import math
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from tensor_eqsat.errors import FormatError
from tensor_eqsat.ir.types import OpKind

DEFAULT_PROFILE = "a100"
"""The paper's main device."""

KIND_KEYS: tuple[OpKind, ...] = (
    OpKind.GEMM,
    OpKind.CONV,
    OpKind.ELEMENTWISE,
    OpKind.REDUCTION,
    OpKind.POOL,
    OpKind.MEMORY,
)
"""Op kinds a profile must parameterise."""

OP_VARIANTS = ("poolmax", "poolavg", "conv2d:depthwise", "conv2d:grouped")
"""Keys a profile's ``ops`` object may override."""

MAX_WINOGRAD = 2.25
"""Upper bound of ``winograd_speedup``: F(2x2, 3x3) makes a 2x2 output tile with 16 multiplies, not 36."""

_SOURCED = ("compute_units", "vector_tflops", "matrix_tflops", "bandwidth_gbs")


@dataclass(frozen=True)
class KindParams:
    """Roofline parameters of one op kind on one device.

    unit: ``"matrix"`` (tensor cores / the GEMM peak) or ``"vector"`` (SIMT / SIMD FMA peak).
    compute_efficiency: fraction of the unit's peak a large problem attains, in (0, 1].
    bandwidth_efficiency: fraction of the memory bandwidth a large transfer attains, in (0, 1].
    launch_us: fixed per-kernel overhead in microseconds.
    tile_rows, tile_cols: the output block one compute unit works on at a time (GEMM/conv
        blocking); a GEMM is padded up to whole tiles, so narrow ones (grouped convs) waste work.
        1 and 1 disable tiling (a CPU core).
    fill_waves: how many waves of tiles the device needs to be half busy; problems with few
        output tiles run below peak. 0 disables the effect.
    depth_overhead: extra reduction steps charged per output element and depth chunk
        (prologue/epilogue work); it makes shallow reductions less efficient than deep ones.
    split_depth: reduction length one block handles when a product is split along its depth
        (split-K, as cuBLAS does for tall-skinny problems), so few-tile, deep GEMMs still fill the
        device. 0 disables splitting.
    serial_groups: grouped (not depthwise) convs run their groups one after another, each paying
        the fill cost (what cuDNN's grouped convolutions measure like). Default False.
    bias_pass: a conv without a fused activation also runs a separate bias-add kernel over its
        output, priced with the element-wise parameters (TASO's cuDNN runtime does this:
        cudnnConvolutionForward then cudnnAddTensor; ../reference/taso.md §2.1). Default False.
    winograd_speedup: reduction of the multiply work of dense 3x3 stride-1 convs by Winograd-type
        algorithms (cuDNN picks them when faster); at most 2.25, the F(2x2, 3x3) ratio, so that
        a 3x3 conv never costs less than a 1x3 one. 1 disables it.
    """

    unit: str
    compute_efficiency: float
    bandwidth_efficiency: float
    launch_us: float
    tile_rows: int = 1
    tile_cols: int = 1
    fill_waves: float = 0.0
    depth_overhead: float = 0.0
    split_depth: float = 0.0
    serial_groups: bool = False
    bias_pass: bool = False
    winograd_speedup: float = 1.0


@dataclass(frozen=True)
class DeviceProfile:
    """One device: datasheet peaks (with sources) and fitted per-kind parameters.

    compute_units: SMs on a GPU; cores running the inference thread(s) on a CPU.
    vector_tflops / matrix_tflops: fp32 peak of the vector unit and of the matrix unit (equal when
        the device has no separate matrix unit).
    bandwidth_gbs: main-memory bandwidth in GB/s (1e9 bytes/s).
    cache_bytes / cache_bandwidth_gbs: a last-level cache; a transfer that fits is served at the
        cache bandwidth. 0 disables it.
    """

    name: str
    description: str
    device: str
    compute_units: int
    vector_tflops: float
    matrix_tflops: float
    bandwidth_gbs: float
    kinds: dict[OpKind, KindParams]
    sources: dict[str, str]
    calibration: str = ""
    cache_bytes: int = 0
    cache_bandwidth_gbs: float = 0.0
    path: str = ""
    ops: dict[str, KindParams] = dataclasses.field(default_factory=dict)

    def op_params(self, op: str, kind: OpKind, variant: str | None = None) -> KindParams:
        """Parameters of one op: its ``ops`` override (``op:variant`` first), else its kind's."""
        if variant is not None and f"{op}:{variant}" in self.ops:
            return self.ops[f"{op}:{variant}"]
        return self.ops.get(op) or self.params(kind)

    def params(self, kind: OpKind) -> KindParams:
        """Parameters of ``kind``; weight transforms on activations use the memory parameters."""
        if kind is OpKind.WEIGHT_TRANSFORM:
            kind = OpKind.MEMORY
        try:
            return self.kinds[kind]
        except KeyError:
            raise FormatError(f"profile {self.name!r}: no parameters for op kind {kind.value!r}") from None

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as stored in the profile file)."""
        return {
            "name": self.name,
            "description": self.description,
            "device": self.device,
            "compute_units": self.compute_units,
            "vector_tflops": self.vector_tflops,
            "matrix_tflops": self.matrix_tflops,
            "bandwidth_gbs": self.bandwidth_gbs,
            "cache_bytes": self.cache_bytes,
            "cache_bandwidth_gbs": self.cache_bandwidth_gbs,
            "sources": dict(self.sources),
            "calibration": self.calibration,
            "kinds": {k.value: _kind_dict(p) for k, p in self.kinds.items()},
            **({"ops": {k: _kind_dict(p) for k, p in self.ops.items()}} if self.ops else {}),
        }


def _kind_dict(params: KindParams) -> dict[str, Any]:
    """The JSON form of one kind's parameters; optional fields left at their default are omitted."""
    out: dict[str, Any] = {}
    for f in dataclasses.fields(params):
        value = getattr(params, f.name)
        if f.default is dataclasses.MISSING or value != f.default:
            out[f.name] = value
    return out


def _number(where: str, data: dict[str, Any], key: str, *, positive: bool = True, default: Any = None) -> Any:
    if key not in data:
        if default is not None:
            return default
        raise FormatError(f"{where}: missing field {key!r}")
    value = data[key]
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise FormatError(f"{where}: field {key!r} must be a number, got {value!r}")
    if value < 0 or (positive and value == 0):
        raise FormatError(f"{where}: field {key!r} must be {'> 0' if positive else '>= 0'}, got {value!r}")
    return value


def _bool(where: str, data: dict[str, Any], key: str) -> bool:
    value = data.get(key, False)
    if not isinstance(value, bool):
        raise FormatError(f"{where}: field {key!r} must be true or false, got {value!r}")
    return value


def _kind_params(where: str, data: Any) -> KindParams:
    if not isinstance(data, dict):
        raise FormatError(f"{where}: expected an object")
    known = set(KindParams.__dataclass_fields__)
    unknown = set(data) - known
    if unknown:
        raise FormatError(
            f"{where}: unknown field {sorted(unknown)[0]!r} (known: {', '.join(sorted(known))})"
        )
    unit = data.get("unit")
    if unit not in ("matrix", "vector"):
        raise FormatError(f"{where}: field 'unit' must be 'matrix' or 'vector', got {unit!r}")
    params = KindParams(
        unit=unit,
        compute_efficiency=float(_number(where, data, "compute_efficiency")),
        bandwidth_efficiency=float(_number(where, data, "bandwidth_efficiency")),
        launch_us=float(_number(where, data, "launch_us", positive=False)),
        tile_rows=int(_number(where, data, "tile_rows", default=1)),
        tile_cols=int(_number(where, data, "tile_cols", default=1)),
        fill_waves=float(_number(where, data, "fill_waves", positive=False, default=0.0)),
        depth_overhead=float(_number(where, data, "depth_overhead", positive=False, default=0.0)),
        split_depth=float(_number(where, data, "split_depth", positive=False, default=0.0)),
        serial_groups=_bool(where, data, "serial_groups"),
        bias_pass=_bool(where, data, "bias_pass"),
        winograd_speedup=float(_number(where, data, "winograd_speedup", default=1.0)),
    )
    if not 1.0 <= params.winograd_speedup <= MAX_WINOGRAD:
        raise FormatError(f"{where}: field 'winograd_speedup' must be in [1, {MAX_WINOGRAD}]")
    for key in ("compute_efficiency", "bandwidth_efficiency"):
        if getattr(params, key) > 1.0:
            raise FormatError(f"{where}: field {key!r} must be <= 1, got {getattr(params, key)}")
    return params


def profile_from_dict(data: Any, source: str = "<dict>") -> DeviceProfile:
    """Build and validate a profile from its JSON form; FormatError names ``source`` and the field."""
    if not isinstance(data, dict):
        raise FormatError(f"{source}: a device profile must be a JSON object")
    for key in ("name", "description", "device"):
        if not isinstance(data.get(key), str) or not data[key]:
            raise FormatError(f"{source}: field {key!r} must be a non-empty string")
    sources = data.get("sources")
    if not isinstance(sources, dict) or not all(isinstance(v, str) and v for v in sources.values()):
        raise FormatError(f"{source}: field 'sources' must map field names to non-empty strings")
    for key in _SOURCED:
        if key not in sources:
            raise FormatError(f"{source}: 'sources' must say where {key!r} comes from")
    kinds_data = data.get("kinds")
    if not isinstance(kinds_data, dict):
        raise FormatError(f"{source}: field 'kinds' must be an object")
    names = {k.value: k for k in OpKind}
    kinds: dict[OpKind, KindParams] = {}
    for key, value in kinds_data.items():
        if key not in names:
            raise FormatError(f"{source}: kinds: unknown op kind {key!r}")
        kinds[names[key]] = _kind_params(f"{source}: kinds.{key}", value)
    for kind in KIND_KEYS:
        if kind not in kinds:
            raise FormatError(f"{source}: kinds: missing parameters for {kind.value!r}")
    ops_data = data.get("ops", {})
    if not isinstance(ops_data, dict):
        raise FormatError(f"{source}: field 'ops' must be an object")
    ops: dict[str, KindParams] = {}
    for key, value in ops_data.items():
        if key not in OP_VARIANTS:
            raise FormatError(
                f"{source}: ops: unknown op or variant {key!r} (known: {', '.join(OP_VARIANTS)})"
            )
        ops[key] = _kind_params(f"{source}: ops.{key}", value)
    cache_bytes = int(_number(source, data, "cache_bytes", positive=False, default=0))
    cache_bw = float(_number(source, data, "cache_bandwidth_gbs", positive=False, default=0.0))
    if cache_bytes and not cache_bw:
        raise FormatError(f"{source}: 'cache_bytes' needs 'cache_bandwidth_gbs'")
    return DeviceProfile(
        name=data["name"],
        description=data["description"],
        device=data["device"],
        compute_units=int(_number(source, data, "compute_units")),
        vector_tflops=float(_number(source, data, "vector_tflops")),
        matrix_tflops=float(_number(source, data, "matrix_tflops")),
        bandwidth_gbs=float(_number(source, data, "bandwidth_gbs")),
        kinds=kinds,
        sources=dict(sources),
        calibration=str(data.get("calibration", "")),
        cache_bytes=cache_bytes,
        cache_bandwidth_gbs=cache_bw,
        path=source,
        ops=ops,
    )


def profile_names() -> list[str]:
    """Names of the profiles shipped with the package.

    >>> profile_names()
    ['a100', 'cpu', 'h100', 'p100']
    """
    folder = resources.files("tensor_eqsat.cost").joinpath("profiles")
    return sorted(p.name[: -len(".json")] for p in folder.iterdir() if p.name.endswith(".json"))


@functools.lru_cache(maxsize=32)
def load_profile(name_or_path: str = DEFAULT_PROFILE) -> DeviceProfile:
    """A shipped profile by name (``"a100"``, ``"p100"``, ``"h100"``, ``"cpu"``) or a JSON file path.

    Raises FormatError naming the profile (and the known names) or the file and field.

    >>> load_profile("a100").compute_units
    108
    """
    if name_or_path.endswith(".json") or "/" in name_or_path:
        path = Path(name_or_path)
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as exc:
            raise FormatError(f"{path}: cannot read device profile ({exc.strerror})") from None
        except UnicodeDecodeError as exc:
            raise FormatError(
                f"{path}: device profile is not UTF-8 text (byte {exc.start}: {exc.reason})"
            ) from None
        source = str(path)
    else:
        if name_or_path not in profile_names():
            known = ", ".join(profile_names())
            raise FormatError(f"unknown device profile {name_or_path!r} (known: {known}, or a .json path)")
        text = resources.files("tensor_eqsat.cost").joinpath("profiles", f"{name_or_path}.json").read_text()
        source = f"profiles/{name_or_path}.json"
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise FormatError(f"{source}: line {exc.lineno}: invalid JSON ({exc.msg})") from None
    return profile_from_dict(data, source)
