// Included (without include guard) right after the system headers that "macros_park.h" guarded:
// brings TVM's prelude macros back exactly as they were.
#pragma pop_macro("uint64_t")
#pragma pop_macro("int64_t")
#pragma pop_macro("ushort")
#pragma pop_macro("uchar")
#pragma pop_macro("uint")
