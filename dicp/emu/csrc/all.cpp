// The runtime builds as this one translation unit. Every source includes ATen's and the
// dispatcher's headers, and parsing them is most of the build (about 10 s of CPU per file):
// one unit builds in a third of the CPU time nine take. Each file still reads on its own;
// names private to a file (anonymous namespaces) must differ from the other files'.
#include "core_ops.cpp"
#include "device.cpp"
#include "fallback.cpp"
#include "launch.cpp"
#include "layouts.cpp"
#include "memory.cpp"
#include "module.cpp"
#include "native_ops.cpp"
#include "ops_util.cpp"
#include "rnn_cells.cpp"
#include "streams.cpp"
