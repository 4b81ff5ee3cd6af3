"""``tilelang.jit.adapter``: upstream's execution backends (tvm_ffi, cython, nvrtc, cutedsl).

We have one backend (nvcc or NVRTC, then the CUDA driver through ``tilelang.jit.driver``), so
this package only keeps the names upstream code imports that have a meaning here:
``tilelang.jit.adapter.nvrtc`` (``is_nvrtc_available``, ``include_paths``).
"""
