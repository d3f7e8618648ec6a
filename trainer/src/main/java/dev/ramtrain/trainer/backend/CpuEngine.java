package dev.ramtrain.trainer.backend;

/**
 * Who computes the CPU backend's convolutions ({@code ramtrain.cpu.engine}): oneDNN's kernels, or
 * the plain-Java ones (im2col with OpenBLAS), the readable reference oneDNN is checked against.
 * {@code auto} is oneDNN where its natives load (linux-x86_64) and the Java kernels elsewhere, with
 * one log line saying why.
 */
public enum CpuEngine {
  AUTO,
  ONEDNN,
  JAVA
}
