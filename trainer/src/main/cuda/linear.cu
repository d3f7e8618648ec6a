// The kernels around a fully connected layer and the loss: bias, its gradient, softmax
// cross-entropy, and the input normalization that turns uint8 pixels into the first activations.
#include "ramtrain.cuh"

// y[r, c] += bias[c]
extern "C" __global__ void add_bias_f32(float* y, const float* bias, int rows, int cols) {
  long long n = (long long)rows * cols;
  RT_FOR_EACH(i, n) { y[i] += bias[i % cols]; }
}
RT_KERNEL(add_bias_f32)

// out[c] = beta * out[c] + sum over r of x[r, c]: a thread per column, rows summed in order in
// double, as the CPU backend does (so the two agree to the bit).
extern "C" __global__ void sum_rows_f32(const float* x, float* out, int rows, int cols,
                                        float beta) {
  RT_FOR_EACH(c, cols) {
    double sum = 0;
    for (int r = 0; r < rows; r++) {
      sum += x[(long long)r * cols + c];
    }
    out[c] = (float)(beta == 0.0f ? sum : (double)(beta * out[c]) + sum);
  }
}
RT_KERNEL(sum_rows_f32)

// Softmax cross-entropy with label smoothing, a thread per row (a row is at most a few thousand
// classes). A label outside [0, classes) is reported through the stream's status word and the
// row's loss becomes NaN, as no class can be trusted.
extern "C" __global__ void softmax_xent_f32(const float* logits, const int* labels, int rows,
                                            int classes, float smoothing, float* loss,
                                            float* dlogits, RtStatus* status) {
  double off = (double)smoothing / classes;
  double on = 1.0 - smoothing + off;
  RT_FOR_EACH(r, rows) {
    int label = labels[r];
    const float* row = logits + (long long)r * classes;
    float* grad = dlogits + (long long)r * classes;
    if (label < 0 || label >= classes) {
      if (atomicCAS(&status->code, RT_STATUS_OK, RT_STATUS_BAD_LABEL) == RT_STATUS_OK) {
        status->where = (int)r;
        status->value = label;
        status->limit = classes;
      }
      loss[r] = __int_as_float(0x7FC00000);
      continue;
    }
    double max = -1.0 / 0.0;
    for (int c = 0; c < classes; c++) {
      max = fmax(max, (double)row[c]);
    }
    double sum = 0;
    for (int c = 0; c < classes; c++) {
      sum += exp(row[c] - max);
    }
    double log_sum = max + log(sum);
    double row_loss = 0;
    for (int c = 0; c < classes; c++) {
      double target = c == label ? on : off;
      double logp = row[c] - log_sum;
      row_loss -= target * logp;
      grad[c] = (float)((exp(logp) - target) / rows);
    }
    loss[r] = (float)row_loss;
  }
}
RT_KERNEL(softmax_xent_f32)

// Per-channel scale and shift of the input normalization, for up to four channels:
// (x / 255 - mean) / std = x * scale - shift with scale = 1 / (255 std), shift = mean / std.
struct RtChannelAffine {
  float scale[4];
  float shift[4];
};

// uint8 HWC images to F32 NCHW, a thread per output element.
extern "C" __global__ void normalize_images_u8(const unsigned char* u8, int n, int h, int w,
                                               int c, RtChannelAffine affine, float* out) {
  long long plane = (long long)h * w;
  long long total = (long long)n * c * plane;
  RT_FOR_EACH(o, total) {
    long long p = o % plane;
    long long nc = o / plane;
    int ch = (int)(nc % c);
    long long image = nc / c;
    float pixel = (float)u8[image * plane * c + p * c + ch];
    out[o] = pixel * affine.scale[ch] - affine.shift[ch];
  }
}
RT_KERNEL(normalize_images_u8)
