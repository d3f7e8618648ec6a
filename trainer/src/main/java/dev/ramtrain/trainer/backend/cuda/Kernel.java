package dev.ramtrain.trainer.backend.cuda;

/** The kernels of trainer/src/main/cuda that the backend launches, by their extern "C" names. */
enum Kernel {
  FILL("fill_f32"),
  ADD("add_f32"),
  MULTIPLY("multiply_f32"),
  LERP("lerp_f32"),
  RELU("relu_f32"),
  RELU_BACKWARD("relu_backward_f32"),
  GELU("gelu_f32"),
  GELU_BACKWARD("gelu_backward_f32"),
  DROPOUT_MASK("dropout_mask_f32"),
  TO_BF16("f32_to_bf16"),
  FROM_BF16("bf16_to_f32"),
  ADD_BIAS("add_bias_f32"),
  SUM_ROWS("sum_rows_f32"),
  SOFTMAX_XENT("softmax_xent_f32"),
  BLEND_BATCH("blend_batch_f32"),
  CUTMIX_BATCH("cutmix_batch_f32"),
  COLOR_JITTER("color_jitter_f32"),
  NORMALIZE_IMAGES("normalize_images_u8"),
  IM2COL("im2col_f32"),
  COL2IM("col2im_f32"),
  ADD_CHANNEL_BIAS("add_channel_bias_f32"),
  SUM_CHANNELS("sum_channels_f32"),
  DEPTHWISE_FORWARD("depthwise_forward_f32"),
  DEPTHWISE_BACKWARD_DATA("depthwise_backward_data_f32"),
  DEPTHWISE_BACKWARD_WEIGHT("depthwise_backward_weight_f32"),
  MAX_POOL("max_pool_f32"),
  MAX_POOL_BACKWARD("max_pool_backward_f32"),
  BATCHNORM_TRAIN("batchnorm_train_f32"),
  BATCHNORM_INFERENCE("batchnorm_inference_f32"),
  BATCHNORM_BACKWARD("batchnorm_backward_f32"),
  LAYERNORM("layernorm_f32"),
  LAYERNORM_BACKWARD_DX("layernorm_backward_dx_f32"),
  LAYERNORM_BACKWARD_PARAMS("layernorm_backward_params_f32"),
  SOFTMAX("softmax_f32"),
  SOFTMAX_BACKWARD("softmax_backward_f32"),
  STRIDED_COPY("strided_copy_f32"),
  SGD_STEP("sgd_step_f32"),
  ADAMW_STEP("adamw_step_f32"),
  CLIP_CHUNK_SQUARES("clip_chunk_squares_f32"),
  CLIP_NORM("clip_norm_f32"),
  CLIP_SCALE("clip_scale_f32"),
  GEMM_F32_F32("gemm_f32_f32"),
  GEMM_BF16_F32("gemm_bf16_f32"),
  GEMM_F32_BF16("gemm_f32_bf16"),
  GEMM_BF16_BF16("gemm_bf16_bf16");

  final String symbol;

  Kernel(String symbol) {
    this.symbol = symbol;
  }
}
