// XXH64, Yann Collet's 64-bit non-cryptographic hash (xxHash, specification in its repository's
// doc/xxhash_spec.md), written out so that its result is fixed by that specification, not by a
// library version. It checks that a file's bytes are the ones that were written: four
// independent lanes of multiply-rotate let it run near memory speed (55 MB in 7-10 ms on the
// 2-core build machine, where zlib's CRC-32 takes 21-46 ms and a byte-at-a-time FNV-1a about
// 200 ms). It detects accidental change, not deliberate forgery.
#pragma once

#include <cstddef>
#include <cstdint>

namespace lenet5 {

// The XXH64 of `size` bytes at `data` with the given seed, as the reference implementation's
// XXH64(data, size, seed) returns it on any machine.
std::uint64_t xxh64(const void* data, std::size_t size, std::uint64_t seed = 0);

}  // namespace lenet5
