"""What adb-emu says it is: system properties, the CNXN banner and its features."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# Features the host may rely on. shell_v2: separate stdout/stderr and exit codes;
# cmd: the device has the `cmd` service tool (host-side `adb install` path choice);
# fixed_push_mkdir: SEND creates missing parent directories.
FEATURES = ("shell_v2", "cmd", "fixed_push_mkdir")

# Properties the banner carries. The adb client reads name, model and device (shown
# by `adb devices -l`) and features; it ignores the others.
_BANNER_KEYS = (
    "ro.product.name",
    "ro.product.model",
    "ro.product.device",
    "ro.product.cpu.abi",
    "ro.product.cpu.abilist",
)


@dataclass(frozen=True)
class DeviceProperties:
    """The device's identity, as ``getprop`` and ``adb devices -l`` report it."""

    model: str = "adb-emu"
    device: str = "adb_emu_arm64"
    name: str = "adb_emu"
    abi: str = "arm64-v8a"
    abilist: str = "arm64-v8a"
    sdk: int = 34
    release: str = "14"
    extra: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for key, value in self.as_dict().items():
            if not key or any(c in key for c in "=\n\0"):
                raise ValueError(f"property name {key!r}: must be non-empty, without = or newline")
            if any(c in value for c in "\n\0"):
                raise ValueError(f"property {key}={value!r}: a value cannot hold a newline")
            if key in _BANNER_KEYS and any(c in value for c in ";:="):
                raise ValueError(
                    f"property {key}={value!r}: ';', ':' and '=' would break the adb banner"
                )

    def as_dict(self) -> dict[str, str]:
        """All properties, as ``getprop`` lists them."""
        props = {
            "ro.product.model": self.model,
            "ro.product.device": self.device,
            "ro.product.name": self.name,
            "ro.product.cpu.abi": self.abi,
            "ro.product.cpu.abilist": self.abilist,
            "ro.build.version.sdk": str(self.sdk),
            "ro.build.version.release": self.release,
            "ro.kernel.qemu": "0",
            "ro.secure": "0",
            "ro.debuggable": "1",
        }
        props.update(self.extra)
        return props

    def banner(self) -> bytes:
        """The CNXN payload: ``device::key=value;...;features=a,b``."""
        props = self.as_dict()
        pairs = [f"{key}={props[key]}" for key in _BANNER_KEYS]
        pairs.append("features=" + ",".join(FEATURES))
        return ("device::" + ";".join(pairs)).encode()

    def build_prop(self) -> str:
        """The text of ``/system/build.prop`` that the device's ``getprop`` reads."""
        return "".join(f"{key}={value}\n" for key, value in sorted(self.as_dict().items()))


DEFAULT_PROPERTIES = DeviceProperties()
