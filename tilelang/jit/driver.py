"""A minimal CUDA driver API binding over ctypes (libcuda.so.1), no extra dependency.

Contract:
- Nothing is loaded at import time.  The first use loads libcuda.so.1 and
  calls cuInit; failure raises ``NoCudaError`` ("no CUDA device: ...").
- Kernels run in the *primary context* of a device: the context the CUDA
  runtime, and hence torch, uses.  ``torch.cuda.init()`` is called first (when
  torch is importable) so torch owns its initialisation.  Where this thread's
  current context is not that one (a fresh thread, another device selected),
  the primary context is pushed around the call and popped after, so the
  caller's current device is never changed.
- ``load_module``/``get_function``/``launch`` are the general API: ``launch``
  takes ctypes values (c_void_p, c_int32, c_int64, c_float, ..., or a 128-byte
  ctypes array such as a CUtensorMap) passed by value; the caller must have
  the function's context current (``with context(device):``).
- ``KernelLauncher`` is the fast path for one kernel: the argument layout is
  fixed at construction; the caller guarantees 0 < grid dims within CUDA's
  limits (x < 2**31, y, z <= 65535); a call packs all values with one ``struct.pack_into``
  into a preallocated buffer and makes one cuLaunchKernel call. ``direct_state(device)`` hands
  an argument plan what it needs to launch inline instead (a prebuilt CUlaunchConfig in front
  of the argument buffer, packed with the arguments in one call, and cuLaunchKernelEx).  Modules are
  loaded lazily per device index and never unloaded (a kernel may still be
  running when its Python owner dies).  Calls are thread-safe (one lock).
- Launch attributes (``KernelLauncher(pdl=..., l2_window=...)``): a kernel that calls
  ``T.pdl_sync`` is launched with cuLaunchKernelEx and the programmatic-stream-serialization
  attribute, so it may start while the previous kernel on the stream finishes (falling back to
  the plain launch, with a warning once, where the driver lacks cuLaunchKernelEx or refuses the
  attribute); a ``T.annotate_l2_hit_ratio`` kernel sets a CUDA access-policy window over its
  tensor on the launch stream (hits persisting, misses streaming, the context's persisting-L2
  limit raised to the window) before the launch and resets window, persisting lines and limit
  after it.  The ctypes structs mirror cuda.h (CUDA 12/13 layouts, checked by
  ``tests/test_launch_attributes.py``).
- ``encode_tensormap(dtype, dims, strides, box, swizzle, address)`` builds a
  CUtensorMap (128 bytes) with cuTensorMapEncodeTiled: dims/box in elements,
  innermost first; strides in bytes for dims 1..rank-1; swizzle in bytes
  (0, 32, 64, 128); no interleave, L2 promotion 128B, no OOB fill, element
  strides 1.  The result is plain ``bytes``, packed as a "tensormap" argument.
- Errors become ``CudaDriverError`` with cuGetErrorName/cuGetErrorString text.
"""

from __future__ import annotations

import ctypes
import struct
import threading
from contextlib import contextmanager

CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0
CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1
CU_FUNC_ATTRIBUTE_NUM_REGS = 4
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97
DEFAULT_SMEM_LIMIT = 48 * 1024  # dynamic smem above this needs the opt-in attribute

_VP, _U, _I = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int
# name in libcuda -> argtypes (every function returns CUresult, an int)
_SIGNATURES = {
    "cuInit": [_U],
    "cuDriverGetVersion": [_VP],
    "cuGetErrorName": [_I, _VP],
    "cuGetErrorString": [_I, _VP],
    "cuDeviceGet": [_VP, _I],
    "cuDeviceGetCount": [_VP],
    "cuDeviceGetAttribute": [_VP, _I, _I],
    "cuDevicePrimaryCtxRetain": [_VP, _I],
    "cuCtxGetCurrent": [_VP],
    "cuCtxSetCurrent": [_VP],
    "cuCtxPushCurrent_v2": [_VP],
    "cuCtxPopCurrent_v2": [_VP],
    "cuModuleLoadData": [_VP, ctypes.c_char_p],
    "cuModuleGetFunction": [_VP, _VP, ctypes.c_char_p],
    "cuModuleUnload": [_VP],
    "cuFuncGetAttribute": [_VP, _I, _VP],
    "cuFuncSetAttribute": [_VP, _I, _I],
    "cuLaunchKernel": [_VP, _U, _U, _U, _U, _U, _U, _U, _VP, _VP, _VP],
    "cuLaunchCooperativeKernel": [_VP, _U, _U, _U, _U, _U, _U, _U, _VP, _VP],   # T.sync_grid kernels
    # (tensorMap, dataType, rank, globalAddress, globalDim, globalStrides, boxDim, elementStrides,
    #  interleave, swizzle, l2Promotion, oobFill)
    "cuTensorMapEncodeTiled": [_VP, _I, ctypes.c_uint32, _VP, _VP, _VP, _VP, _VP, _I, _I, _I, _I],
    "cuLaunchKernelEx": [_VP, _VP, _VP, _VP],                 # (config*, func, params, extra)
    "cuStreamSetAttribute": [_VP, _I, _VP],                   # (stream, attr id, value*)
    "cuCtxGetLimit": [_VP, _I],                               # (size_t*, limit)
    "cuCtxSetLimit": [_I, ctypes.c_size_t],
    "cuCtxResetPersistingL2Cache": [],
}
# entry points absent from older drivers: bound to None there, checked at use
_OPTIONAL = {"cuTensorMapEncodeTiled", "cuLaunchCooperativeKernel", "cuLaunchKernelEx", "cuStreamSetAttribute",
             "cuCtxGetLimit", "cuCtxSetLimit", "cuCtxResetPersistingL2Cache"}

# ---- launch attributes (cuda.h: CUlaunchAttributeID, CUaccessProperty, CUlimit) ----
CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW = 1     # also CU_STREAM_ATTRIBUTE_ACCESS_POLICY_WINDOW
CU_LAUNCH_ATTRIBUTE_COOPERATIVE = 2
CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION = 6
CU_ACCESS_PROPERTY_STREAMING, CU_ACCESS_PROPERTY_PERSISTING = 1, 2
CU_LIMIT_PERSISTING_L2_CACHE_SIZE = 0x06
CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE = 108
CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE = 109
CUDA_ERROR_NOT_SUPPORTED = 801


class CUaccessPolicyWindow(ctypes.Structure):
    """cuda.h ``CUaccessPolicyWindow_v1``: 32 bytes."""
    _fields_ = [("base_ptr", ctypes.c_void_p), ("num_bytes", ctypes.c_size_t), ("hitRatio", ctypes.c_float),
                ("hitProp", ctypes.c_int), ("missProp", ctypes.c_int)]


class CUlaunchAttributeValue(ctypes.Union):
    """cuda.h ``CUlaunchAttributeValue`` (= ``CUstreamAttrValue``): a 64-byte union, 8-aligned."""
    _fields_ = [("pad", ctypes.c_char * 64), ("accessPolicyWindow", CUaccessPolicyWindow),
                ("cooperative", ctypes.c_int), ("programmaticStreamSerializationAllowed", ctypes.c_int)]


class CUlaunchAttribute(ctypes.Structure):
    """cuda.h ``CUlaunchAttribute``: the id, 4 bytes of padding, the value (72 bytes)."""
    _fields_ = [("id", ctypes.c_int), ("pad", ctypes.c_char * 4), ("value", CUlaunchAttributeValue)]


class CUlaunchConfig(ctypes.Structure):
    """cuda.h ``CUlaunchConfig`` (56 bytes)."""
    _fields_ = [("gridDimX", ctypes.c_uint), ("gridDimY", ctypes.c_uint), ("gridDimZ", ctypes.c_uint),
                ("blockDimX", ctypes.c_uint), ("blockDimY", ctypes.c_uint), ("blockDimZ", ctypes.c_uint),
                ("sharedMemBytes", ctypes.c_uint), ("hStream", ctypes.c_void_p),
                ("attrs", ctypes.POINTER(CUlaunchAttribute)), ("numAttrs", ctypes.c_uint)]

CU_TENSOR_MAP_INTERLEAVE_NONE = 0
CU_TENSOR_MAP_SWIZZLE = {0: 0, 32: 1, 64: 2, 128: 3}  # bytes -> CUtensorMapSwizzle
CU_TENSOR_MAP_L2_PROMOTION_L2_128B = 2
CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE = 0
TENSORMAP_SIZE, TENSORMAP_ALIGN = 128, 128   # cuda.h 13 declares CUtensorMap alignas(128)


class CudaDriverError(RuntimeError):
    """A CUDA driver call failed; ``code`` and ``name`` identify the CUresult."""

    def __init__(self, message: str, code: int = -1, name: str = ""):
        super().__init__(message)
        self.code = code
        self.name = name


class NoCudaError(RuntimeError):
    """No usable CUDA driver or device."""


class _Driver:
    """libcuda.so.1 with typed entry points, initialised once."""

    def __init__(self):
        try:
            lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise NoCudaError(f"no CUDA device: the CUDA driver library libcuda.so.1 could not be loaded ({e})") from None
        for name, argtypes in _SIGNATURES.items():
            fn = getattr(lib, name, None)
            if fn is None and name in _OPTIONAL:
                setattr(self, name, None)
                continue
            if fn is None:
                raise NoCudaError(f"no CUDA device: libcuda.so.1 lacks {name}; the driver is too old")
            fn.argtypes, fn.restype = argtypes, ctypes.c_int
            setattr(self, name, fn)
        # The two per-launch calls go through a second handle without argtypes: ctypes then
        # skips per-argument conversion (about 1 us per launch); callers pass only C ints,
        # ctypes objects and None, so nothing is truncated.
        fast = ctypes.CDLL("libcuda.so.1")
        self.fast_launch, self.fast_get_current = fast.cuLaunchKernel, fast.cuCtxGetCurrent
        self.fast_launch.restype = self.fast_get_current.restype = ctypes.c_int
        # cuLaunchKernelEx(config*, func, params, extra): the inline launch of ArgPlan packs grid,
        # block, smem and stream into a prebuilt CUlaunchConfig, so the call converts 4 arguments
        self.fast_launch_ex = getattr(fast, "cuLaunchKernelEx", None)
        if self.fast_launch_ex is not None:
            self.fast_launch_ex.restype = ctypes.c_int
        rc = self.cuInit(0)
        if rc != 0:
            raise NoCudaError(f"no CUDA device: cuInit failed with {self.describe(rc)}")
        self._primary: dict[int, int] = {}
        self._lock = threading.Lock()

    def describe(self, rc: int) -> str:
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self.cuGetErrorName(rc, ctypes.addressof(name))
        self.cuGetErrorString(rc, ctypes.addressof(text))
        n = name.value.decode() if name.value else f"CUresult {rc}"
        t = text.value.decode() if text.value else "unknown error"
        return f"{n}: {t}"

    def check(self, rc: int, what: str) -> None:
        if rc != 0:
            name = self.describe(rc).split(":")[0]
            raise CudaDriverError(f"{what} failed: {self.describe(rc)}", rc, name)

    def out(self, fn, *args, ctype=ctypes.c_void_p, what: str = ""):
        """Call ``fn(&result, *args)`` and return the result's value."""
        result = ctype()
        self.check(fn(ctypes.addressof(result), *args), what or fn.__name__)
        return result.value

    def primary_context(self, device: int) -> int:
        """The (retained, never released) primary context handle of ``device``."""
        ctx = self._primary.get(device)
        if ctx is None:
            with self._lock:
                ctx = self._primary.get(device)
                if ctx is None:
                    count = self.out(self.cuDeviceGetCount, ctype=ctypes.c_int)
                    if not 0 <= device < count:
                        raise NoCudaError(f"no CUDA device: device index {device} is not in [0, {count})")
                    dev = self.out(self.cuDeviceGet, device, ctype=ctypes.c_int)
                    ctx = self._primary[device] = self.out(self.cuDevicePrimaryCtxRetain, dev,
                                                           what=f"cuDevicePrimaryCtxRetain(device {device})")
        return ctx


_driver: _Driver | None = None
_driver_lock = threading.Lock()


def get_driver() -> _Driver:
    """The process-wide driver binding; raises NoCudaError when CUDA is unusable."""
    global _driver
    if _driver is None:
        with _driver_lock:
            if _driver is None:
                _init_torch_cuda()
                _driver = _Driver()
    return _driver


def _init_torch_cuda() -> None:
    """Let torch initialise CUDA first so the primary context is created its way."""
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():
        raise NoCudaError("no CUDA device: torch.cuda.is_available() is False")
    torch.cuda.init()


@contextmanager
def context(device: int):
    """Make ``device``'s primary context current for the block (push/pop when needed)."""
    drv = get_driver()
    ctx = drv.primary_context(device)
    current = drv.out(drv.cuCtxGetCurrent)
    if current == ctx:
        yield ctx
        return
    drv.check(drv.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
    try:
        yield ctx
    finally:
        drv.out(drv.cuCtxPopCurrent_v2)


def device_attribute(device: int, attr: int) -> int:
    drv = get_driver()
    dev = drv.out(drv.cuDeviceGet, device, ctype=ctypes.c_int)
    return drv.out(drv.cuDeviceGetAttribute, attr, dev, ctype=ctypes.c_int)


def compute_capability(device: int) -> tuple[int, int]:
    return (device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR),
            device_attribute(device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR))


def load_module(cubin: bytes) -> int:
    """cuModuleLoadData into the current context; returns the CUmodule handle."""
    drv = get_driver()
    return drv.out(drv.cuModuleLoadData, cubin, what="cuModuleLoadData")


def get_function(module: int, name: str) -> int:
    drv = get_driver()
    return drv.out(drv.cuModuleGetFunction, module, name.encode(),
                   what=f"cuModuleGetFunction({name!r}) (is the kernel extern \"C\"?)")


def func_attribute(func: int, attr: int) -> int:
    drv = get_driver()
    return drv.out(drv.cuFuncGetAttribute, attr, func, ctype=ctypes.c_int)


def set_max_dynamic_smem(func: int, nbytes: int) -> None:
    drv = get_driver()
    drv.check(drv.cuFuncSetAttribute(func, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes),
              f"cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES={nbytes})")


def launch(func: int, grid, block, smem: int, stream: int, args) -> None:
    """Launch ``func`` with ctypes-valued ``args`` (each passed by value)."""
    drv = get_driver()
    params = (ctypes.c_void_p * max(1, len(args)))(*[ctypes.addressof(a) for a in args])
    rc = drv.cuLaunchKernel(func, *grid, *block, smem, stream, params, None)
    drv.check(rc, f"cuLaunchKernel(grid={tuple(grid)}, block={tuple(block)}, smem={smem})")


def encode_tensormap(dtype: str, dims, strides, box, swizzle: int, address: int) -> bytes:
    """A tiled CUtensorMap (128 bytes) for the global tensor at ``address``.

    ``dims`` and ``box`` are in elements, innermost first; ``strides`` are the byte strides of
    dims 1..rank-1; ``swizzle`` is the swizzle width in bytes (0 = none)."""
    return _encode_prepared(_prepare_tensormap(dtype, dims, strides, box, swizzle), int(address))


def tensormap_encoder(dtype: str, dims, strides, box, swizzle: int):
    """``encode(address) -> bytes``: ``encode_tensormap`` with everything but the address fixed,
    checked and its arrays built on the first call; later calls make only the driver call."""
    prepared = []

    def encode(address: int) -> bytes:
        if not prepared:
            prepared.append(_prepare_tensormap(dtype, dims, strides, box, swizzle))
        return _encode_prepared(prepared[0], int(address))

    return encode


def _prepare_tensormap(dtype, dims, strides, box, swizzle) -> tuple:
    """Check a tensor map's description and build its driver arguments (all but the address)."""
    from tilelang.artifact import TENSORMAP_DTYPES

    dims, strides, box = [int(x) for x in dims], [int(x) for x in strides], [int(x) for x in box]
    desc = f"tensor map (dtype={dtype}, dims={dims}, strides={strides}, box={box}, swizzle={swizzle}"
    if dtype not in TENSORMAP_DTYPES:
        raise ValueError(f"{desc}): dtype {dtype!r} is not one of {sorted(TENSORMAP_DTYPES)}")
    if swizzle not in CU_TENSOR_MAP_SWIZZLE:
        raise ValueError(f"{desc}): swizzle {swizzle!r} is not one of {sorted(CU_TENSOR_MAP_SWIZZLE)}")
    rank = len(dims)
    if not 1 <= rank <= 5 or len(box) != rank or len(strides) != rank - 1:
        raise ValueError(f"{desc}): needs rank 1..5 with len(box) == rank and len(strides) == rank - 1")
    drv = get_driver()
    fn = drv.cuTensorMapEncodeTiled
    if fn is None:
        raise CudaDriverError(f"cannot encode {desc}): libcuda.so.1 lacks cuTensorMapEncodeTiled "
                              "(a CUDA 12 driver is needed)")
    arrays = ((ctypes.c_uint64 * rank)(*dims), (ctypes.c_uint64 * max(1, rank - 1))(*strides),
              (ctypes.c_uint32 * rank)(*box), (ctypes.c_uint32 * rank)(*([1] * rank)))
    tail = (*(ctypes.addressof(a) for a in arrays), CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE[swizzle],
            CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE)
    return drv, fn, (TENSORMAP_DTYPES[dtype], rank), tail, arrays, desc


def _encode_prepared(prepared, address: int) -> bytes:
    drv, fn, head, tail, _arrays, desc = prepared
    buf = (ctypes.c_uint8 * (TENSORMAP_SIZE + TENSORMAP_ALIGN))()
    tmap = ctypes.addressof(buf) + (-ctypes.addressof(buf) % TENSORMAP_ALIGN)
    rc = fn(tmap, *head, address, *tail)
    if rc:
        drv.check(rc, f"cuTensorMapEncodeTiled for {desc}, address={address:#x})")
    return ctypes.string_at(tmap, TENSORMAP_SIZE)


# ---------------------------------------------------------------- launch attributes
_warned: set = set()
_l2_caps_cache: dict = {}


def _warn_once(key: str, message: str) -> None:
    if key not in _warned:
        _warned.add(key)
        import warnings
        warnings.warn(message, RuntimeWarning, stacklevel=3)


def _l2_caps(device: int) -> tuple[int, int]:
    """(max persisting-L2 bytes, max access-policy window bytes) of ``device``, cached."""
    caps = _l2_caps_cache.get(device)
    if caps is None:
        caps = _l2_caps_cache[device] = (device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_PERSISTING_L2_CACHE_SIZE),
                                         device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_ACCESS_POLICY_WINDOW_SIZE))
    return caps


def access_policy_window(base: int, nbytes: int, hit_ratio: float) -> CUlaunchAttributeValue:
    """The ``CUstreamAttrValue`` of a window over ``nbytes`` at ``base``: ``hit_ratio`` of its
    lines persisting in L2, the others streaming (``nbytes`` 0: no window, the reset value)."""
    value = CUlaunchAttributeValue()
    window = value.accessPolicyWindow
    window.base_ptr, window.num_bytes, window.hitRatio = int(base) or None, int(nbytes), float(hit_ratio)
    window.hitProp, window.missProp = CU_ACCESS_PROPERTY_PERSISTING, CU_ACCESS_PROPERTY_STREAMING
    if not nbytes:
        value.accessPolicyWindow.hitProp = value.accessPolicyWindow.missProp = 0
        value.accessPolicyWindow.hitRatio = 0.0
    return value


def _reset_l2_window(drv, stream, prev_limit: int) -> None:
    """Drop the stream's window, demote the persisting lines and restore the previous limit."""
    value = access_policy_window(0, 0, 0.0)
    drv.check(drv.cuStreamSetAttribute(stream, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.addressof(value)),
              "cuStreamSetAttribute(ACCESS_POLICY_WINDOW reset)")
    drv.check(drv.cuCtxResetPersistingL2Cache(), "cuCtxResetPersistingL2Cache")
    drv.check(drv.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, prev_limit),
              f"cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, {prev_limit}) (restoring it)")


def launch_config(grid, block, smem: int, stream, attrs) -> tuple:
    """(CUlaunchConfig, its attribute array) for cuLaunchKernelEx; ``attrs`` are (id, int value)
    pairs (PDL, cooperative: both an ``int`` at the start of the value union)."""
    array = (CUlaunchAttribute * max(1, len(attrs)))()
    for slot, (aid, val) in zip(array, attrs):
        slot.id = aid
        slot.value.cooperative = int(val)   # every int-valued attribute sits at offset 0
    stream = getattr(stream, "value", stream)
    cfg = CUlaunchConfig(*(int(g) for g in grid), *(int(b) for b in block), int(smem), stream or None,
                         ctypes.cast(array, ctypes.POINTER(CUlaunchAttribute)), len(attrs))
    return cfg, array


def launch_ex(func, grid, block, smem: int, stream, params, attrs) -> int:
    """cuLaunchKernelEx with launch attributes; returns the CUresult (the caller checks it)."""
    drv = get_driver()
    cfg, _keep = launch_config(grid, block, smem, stream, attrs)
    return drv.cuLaunchKernelEx(ctypes.addressof(cfg), func, params, None)


# ---------------------------------------------------------------- fast launcher
# argument kind -> (struct format, size, alignment); "tensormap" is a CUtensorMap by value.
ARG_FORMATS = {
    "ptr": ("Q", 8, 8), "bool": ("?", 1, 1),
    "int8": ("b", 1, 1), "uint8": ("B", 1, 1), "int16": ("h", 2, 2), "uint16": ("H", 2, 2),
    "int32": ("i", 4, 4), "uint32": ("I", 4, 4), "int64": ("q", 8, 8), "uint64": ("Q", 8, 8),
    "float16": ("e", 2, 2), "float32": ("f", 4, 4), "float64": ("d", 8, 8), "tensormap": ("128s", 128, 64),
}


def arg_layout(kinds: list[str]) -> tuple[str, list[int], int]:
    """(struct format, byte offset of each argument, total size) with natural alignment."""
    fmt, offsets, pos = "<", [], 0
    for kind in kinds:
        if kind not in ARG_FORMATS:
            raise ValueError(f"unsupported kernel argument kind {kind!r}; known: {sorted(ARG_FORMATS)}")
        code, size, align = ARG_FORMATS[kind]
        pad = -pos % align
        fmt += "x" * pad + code
        offsets.append(pos + pad)
        pos += pad + size
    return fmt, offsets, pos


def check_arch_compatible(arch: str, cc: tuple[int, int], device: int) -> None:
    """Raise a clear error when a cubin built for ``arch`` cannot run on a device of ``cc``."""
    from tilelang.artifact import arch_number

    num, suffix = arch_number(arch)
    want = (num // 10, num % 10)
    ok = want == cc if suffix == "a" else (want[0] == cc[0] and want[1] <= cc[1])
    if not ok:
        raise RuntimeError(f"kernel was compiled for {arch} but CUDA device {device} is "
                           f"sm_{cc[0]}{cc[1]}; recompile for that architecture")


# struct format of a CUlaunchConfig without attributes: grid x/y/z, block x/y/z, dynamic smem
# (7 uint32), 4 bytes of padding, hStream (8), attrs = NULL (8), numAttrs = 0 (4), padding to 56
# bytes, then padding to 64 so that the kernel arguments that follow start 64-byte aligned
LAUNCH_CONFIG_FORMAT = "<7I4xQ24x"
LAUNCH_CONFIG_SPAN = 64
# False: kernels bound after this is set keep launching through KernelLauncher.__call__ (for
# A/B timing, or should a driver misbehave with cuLaunchKernelEx)
INLINE_LAUNCH = True


class KernelLauncher:
    """Launches one kernel of one cubin with a fixed argument layout, on any device."""

    def __init__(self, cubin: bytes, name: str, arg_kinds: list[str], block, smem: int, arch: str,
                 cooperative: bool = False, pdl: bool = False, l2_window=None):
        self.cubin, self.name, self.arch = cubin, name, arch
        self.cooperative = cooperative   # grid-wide barriers: all blocks must be co-resident
        self.pdl = pdl                   # T.pdl_sync: programmatic stream serialization
        # T.annotate_l2_hit_ratio: (index in the values of the tensor's pointer, its bytes or None
        # when not static, hit ratio)
        self.l2_window = tuple(l2_window) if l2_window is not None else None
        self._special = pdl or self.l2_window is not None
        self._nargs = len(arg_kinds)   # (an L2 window's tensor address follows the arguments)
        self.block, self.smem = tuple(int(b) for b in block), int(smem)
        fmt, offsets, size = arg_layout(arg_kinds)
        self._pack = struct.Struct(fmt).pack_into
        # over-allocate so the first argument can sit on a 64-byte boundary (CUtensorMap)
        self._buf = ctypes.create_string_buffer(size + 64)
        self._base = -ctypes.addressof(self._buf) % 64
        start = ctypes.addressof(self._buf) + self._base
        self._params = (ctypes.c_void_p * max(1, len(offsets)))(*[start + o for o in offsets])
        self._params_addr = ctypes.addressof(self._params)
        self._params_vp = ctypes.c_void_p(self._params_addr)
        self._cur = ctypes.c_void_p()
        self._cur_addr = ctypes.addressof(self._cur)
        self._cur_ptr = ctypes.pointer(self._cur)
        self._funcs: dict[int, tuple] = {}  # device -> (CUfunction as c_void_p, primary ctx)
        self._lock = threading.Lock()
        self._layout = (fmt, offsets, size)
        self._direct = None   # the inline launch's buffer (direct_state), made on first use

    def direct_state(self, device: int) -> dict | None:
        """What a caller needs to launch this kernel on ``device`` inline, without this object:
        a ``pack(buf, off, gx, gy, gz, bx, by, bz, smem, stream, *values)`` that writes a
        ``CUlaunchConfig`` (no attributes) followed by the arguments, and ``launch_ex(cfg, func,
        params, None)`` (cuLaunchKernelEx). The caller holds ``lock``, calls
        ``get_current(cur_ptr)`` and launches only when ``cur.value == ctx`` (else it calls this
        launcher, which pushes the context); a nonzero result goes to ``fail(rc, device, grid)``.
        None when the kernel needs launch attributes, a cooperative launch, a driver without
        cuLaunchKernelEx, or is not loaded on ``device`` yet."""
        entry = self._funcs.get(device)
        drv = _driver
        if (entry is None or self._special or self.cooperative or drv is None or not INLINE_LAUNCH
                or getattr(drv, "fast_launch_ex", None) is None):
            return None
        with self._lock:
            if self._direct is None:
                fmt, offsets, size = self._layout
                pack = struct.Struct(LAUNCH_CONFIG_FORMAT + fmt[1:])
                buf = ctypes.create_string_buffer(pack.size + 64)
                base = -ctypes.addressof(buf) % 64
                start = ctypes.addressof(buf) + base
                params = (ctypes.c_void_p * max(1, len(offsets)))(*[start + LAUNCH_CONFIG_SPAN + o for o in offsets])
                self._direct = dict(pack=pack.pack_into, buf=buf, off=base, cfg=ctypes.c_void_p(start),
                                    params=ctypes.c_void_p(ctypes.addressof(params)), keep=params)
        func, ctx = entry
        return dict(self._direct, func=func, ctx=ctx, lock=self._lock, get_current=drv.fast_get_current,
                    cur=self._cur, cur_ptr=self._cur_ptr, launch_ex=drv.fast_launch_ex, block=self.block,
                    smem=self.smem, fail=self._fail_direct)

    def _fail_direct(self, rc: int, device: int, grid) -> None:
        self._raise(_driver, rc, device, tuple(grid))

    def __call__(self, device: int, gx: int, gy: int, gz: int, stream: int, values: tuple,
                 smem: int | None = None) -> None:
        """Launch on ``device``; ``smem``: this launch's dynamic shared memory where the kernel's
        is a run-time size (shared buffers of run-time extent), else the launcher's."""
        entry = self._funcs.get(device)
        if entry is None:
            entry = self.load(device)
        func, ctx = entry
        drv = _driver
        bx, by, bz = self.block
        # Without argtypes ctypes passes ints as C ints and silently truncates larger ones, so
        # callers must keep grid dims in CUDA's range (x < 2**31, y, z < 2**16): ArgPlan does.
        # The stream handle is a pointer and is wrapped (None for the NULL stream).
        hstream = ctypes.c_void_p(stream) if stream else None
        with self._lock:
            if smem is not None and smem != self.smem:
                self._resize_smem(func, device, int(smem))
            self._pack(self._buf, self._base, *(values[:self._nargs] if self._special else values))
            drv.fast_get_current(self._cur_ptr)
            if self._special:
                rc = self._launch_special(drv, func, ctx, device, (gx, gy, gz), hstream, values)
            elif self.cooperative:
                rc = self._launch_pushed(drv, func, ctx, (gx, gy, gz), hstream)
            elif self._cur.value == ctx:
                rc = drv.fast_launch(func, gx, gy, gz, bx, by, bz, self.smem, hstream, self._params_vp, None)
            else:
                rc = self._launch_pushed(drv, func, ctx, (gx, gy, gz), hstream)
        if rc:
            self._raise(drv, rc, device, (gx, gy, gz))

    def _launch_pushed(self, drv, func, ctx, grid, stream) -> int:
        """Launch with the primary context pushed (fresh thread, or another device current)."""
        drv.check(drv.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
        try:
            if self.cooperative:
                if drv.cuLaunchCooperativeKernel is None:
                    raise CudaDriverError("T.sync_grid needs cuLaunchCooperativeKernel; the driver lacks it")
                return drv.cuLaunchCooperativeKernel(func, *grid, *self.block, self.smem, stream, self._params_vp)
            return drv.fast_launch(func, *grid, *self.block, self.smem, stream, self._params_vp, None)
        finally:
            drv.cuCtxPopCurrent_v2(self._cur_addr)

    def _launch_special(self, drv, func, ctx, device, grid, stream, values) -> int:
        """A launch with attributes: the L2 access-policy window around it, PDL on it."""
        pushed = self._cur.value != ctx
        if pushed:
            drv.check(drv.cuCtxPushCurrent_v2(ctx), "cuCtxPushCurrent")
        try:
            prev = self._set_l2_window(drv, device, stream, values) if self.l2_window is not None else None
            try:
                return self._launch_with_attributes(drv, func, grid, stream)
            finally:
                if prev is not None:
                    _reset_l2_window(drv, stream, prev)
        finally:
            if pushed:
                drv.cuCtxPopCurrent_v2(self._cur_addr)

    def _launch_with_attributes(self, drv, func, grid, stream) -> int:
        attrs = []
        if self.pdl:
            if drv.cuLaunchKernelEx is None:
                _warn_once("pdl-ex", f"kernel {self.name!r} uses T.pdl_sync but libcuda.so.1 lacks cuLaunchKernelEx; "
                           "it is launched without programmatic stream serialization (correct, no overlap)")
            else:
                attrs.append((CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, 1))
        if attrs and self.cooperative:
            attrs.append((CU_LAUNCH_ATTRIBUTE_COOPERATIVE, 1))
        if attrs:
            rc = launch_ex(func, grid, self.block, self.smem, stream, self._params_vp, attrs)
            if rc != CUDA_ERROR_NOT_SUPPORTED:
                return rc
            _warn_once("pdl-refused", f"the driver refused programmatic stream serialization for kernel "
                       f"{self.name!r} ({drv.describe(rc)}); it is launched without it (correct, no overlap)")
        if self.cooperative:
            if drv.cuLaunchCooperativeKernel is None:
                raise CudaDriverError("T.sync_grid needs cuLaunchCooperativeKernel; the driver lacks it")
            return drv.cuLaunchCooperativeKernel(func, *grid, *self.block, self.smem, stream, self._params_vp)
        return drv.fast_launch(func, *grid, *self.block, self.smem, stream, self._params_vp, None)

    def _set_l2_window(self, drv, device, stream, values):
        """Set the access-policy window over the annotated tensor on ``stream`` and raise the
        persisting-L2 limit to it; returns the previous limit (None: nothing was set)."""
        index, nbytes, ratio = self.l2_window
        if not values[index]:
            return None     # a None (nullable) tensor: no window
        if None in (drv.cuStreamSetAttribute, drv.cuCtxGetLimit, drv.cuCtxSetLimit, drv.cuCtxResetPersistingL2Cache):
            _warn_once("l2-api", "T.annotate_l2_hit_ratio: libcuda.so.1 lacks the stream access-policy entry "
                       "points; the kernel runs without an L2 persistence window")
            return None
        max_persist, max_window = _l2_caps(device)
        if max_persist <= 0 or max_window <= 0:
            _warn_once(f"l2-dev{device}", f"T.annotate_l2_hit_ratio: cuda:{device} has no persisting L2 cache; "
                       "the kernel runs without an L2 persistence window")
            return None
        size = min(nbytes if nbytes else max_persist, max_persist, max_window)
        prev = drv.out(drv.cuCtxGetLimit, CU_LIMIT_PERSISTING_L2_CACHE_SIZE, ctype=ctypes.c_size_t,
                       what="cuCtxGetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE)")
        drv.check(drv.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, size),
                  f"cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, {size})")
        value = access_policy_window(values[index], size, ratio)
        rc = drv.cuStreamSetAttribute(stream, CU_LAUNCH_ATTRIBUTE_ACCESS_POLICY_WINDOW, ctypes.addressof(value))
        if rc:
            drv.cuCtxSetLimit(CU_LIMIT_PERSISTING_L2_CACHE_SIZE, prev)
            drv.check(rc, f"cuStreamSetAttribute(ACCESS_POLICY_WINDOW, {size} bytes, hitRatio={ratio})")
        return prev

    def _raise(self, drv, rc, device, grid):
        hint = ("" if rc in (1, 701) else
                " (this may be a sticky error left by an earlier asynchronous failure)")
        raise CudaDriverError(
            f"launching kernel {self.name!r} on cuda:{device} with grid={grid}, block={self.block}, "
            f"dynamic smem={self.smem} failed: {drv.describe(rc)}{hint}", rc, drv.describe(rc).split(":")[0])

    def load(self, device: int) -> tuple[int, int]:
        """Load the module on ``device`` (once) and prepare the function for launching."""
        drv = get_driver()
        with self._lock:
            entry = self._funcs.get(device)
            if entry is not None:
                return entry
            ctx = drv.primary_context(device)
            check_arch_compatible(self.arch, compute_capability(device), device)
            with context(device):
                func = get_function(load_module(self.cubin), self.name)
                self._configure(func, device)
            self._funcs[device] = entry = (ctypes.c_void_p(func), ctx)
            return entry

    def _resize_smem(self, func, device: int, nbytes: int) -> None:
        """This and later launches take ``nbytes`` of dynamic shared memory (under the lock): the
        function is opted into it past 48 KiB, and a size over the device's limit is an error
        naming it, before the launch."""
        static = func_attribute(func.value, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        limit = device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        if nbytes < 0 or static + nbytes > limit:
            raise RuntimeError(f"kernel {self.name!r} would need {static} B static + {nbytes} B dynamic shared "
                               f"memory for this call (its shared buffers of run-time extent), more than the "
                               f"{limit} B a block may use on cuda:{device}")
        opted = self.__dict__.setdefault("_smem_opted", {})
        if nbytes > max(DEFAULT_SMEM_LIMIT, opted.get(device, 0)):
            set_max_dynamic_smem(func.value, nbytes)
            opted[device] = nbytes
        self.smem = nbytes

    def _configure(self, func: int, device: int) -> None:
        """Opt into large dynamic smem and turn resource overuse into clear errors."""
        static = func_attribute(func, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
        limit = device_attribute(device, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
        if static + self.smem > limit:
            raise RuntimeError(f"kernel {self.name!r} needs {static} B static + {self.smem} B dynamic shared "
                               f"memory, more than the {limit} B a block may use on cuda:{device}")
        if self.smem > DEFAULT_SMEM_LIMIT:
            set_max_dynamic_smem(func, self.smem)
        max_threads = func_attribute(func, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
        threads = self.block[0] * self.block[1] * self.block[2]
        if threads > max_threads:
            regs = func_attribute(func, CU_FUNC_ATTRIBUTE_NUM_REGS)
            raise RuntimeError(f"kernel {self.name!r} launches {threads} threads per block but, using "
                               f"{regs} registers per thread, at most {max_threads} fit on cuda:{device}")
