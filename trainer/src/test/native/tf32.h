// TensorFloat-32 as the tensor cores read fp32 operands: the top 10 mantissa bits, rounded to
// nearest with ties away from zero (cvt.rna.tf32.f32). The emulated cuBLAS and cuDNN round their
// operands so where the caller allows TF32, as a GPU would: a setting that does not reach the
// library shows in the results.
#pragma once

#include <cstring>
#include <vector>

namespace emu {

inline float to_tf32(float value) {
  unsigned int bits;
  std::memcpy(&bits, &value, sizeof bits);
  if ((bits & 0x7f800000u) != 0x7f800000u) {  // infinities and NaNs stay as they are
    bits = (bits + 0x1000u) & ~0x1fffu;
  }
  std::memcpy(&value, &bits, sizeof value);
  return value;
}

// count floats from data, rounded to TF32 into scratch.
inline const float* tf32_copy(const float* data, long long count, std::vector<float>& scratch) {
  scratch.resize(count);
  for (long long i = 0; i < count; i++) scratch[i] = to_tf32(data[i]);
  return scratch.data();
}

}  // namespace emu
