#pragma once
// Device-side output hashing and the two small utility kernels the CUDA backend needs. Hashing on
// the GPU reads each output once at memory speed instead of copying it to the host first; the
// chunk hashes are bit-identical to hash_buffer's (kernels/hash.h), and whole_hash_of_chunks
// turns them into the whole hash on the host.
//
// Plain host header (no device code) so any C++ compiler can include it; the definitions live in
// kernels/device_hash.cu, built only with the CUDA backend. Every launch is asynchronous on the
// given stream and throws cprr::Error (runtime/cuda_check.h) if the launch itself fails.
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace cprr::kernels {

/// Uploads the hash secret to the current device's constant memory if this process has not yet
/// done so, and returns once it landed. launch_chunk_hashes calls it lazily; call it first when
/// launches will be captured into a CUDA graph, since the upload is a synchronous copy that
/// capture would forbid (the cuda capture hasher calls it when it is made, before a case runs).
void prepare_device_hash();

/// Writes hash_chunk_count(bytes) chunk hashes of the device buffer `data` to the device array
/// `chunk_hashes`, each equal to hash_buffer's chunk hash of the same bytes. `data` may have any
/// alignment (an 8-byte-aligned buffer takes the fast path). 0 bytes launches nothing.
void launch_chunk_hashes(const void* data, std::size_t bytes, uint64_t* chunk_hashes,
                         cudaStream_t stream);

/// Fills `bytes` bytes of device memory at `data` (any alignment and size) with the repeating
/// little-endian `pattern`, byte i getting byte (i % 8): the device twin of poison_host.
void launch_poison(void* data, std::size_t bytes, uint64_t pattern, cudaStream_t stream);

}  // namespace cprr::kernels
