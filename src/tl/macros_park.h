// Included (without include guard) right before system headers: parks TVM's prelude macros
// `uint`, `uchar`, `ushort`, `int64_t` and `uint64_t`, which would otherwise rewrite the system
// headers' own typedefs. Always pair with "macros_restore.h". Not for NVRTC (no push_macro).
#pragma push_macro("uint")
#pragma push_macro("uchar")
#pragma push_macro("ushort")
#pragma push_macro("int64_t")
#pragma push_macro("uint64_t")
#undef uint
#undef uchar
#undef ushort
#undef int64_t
#undef uint64_t
